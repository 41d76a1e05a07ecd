// Whole-file reads and atomic writes, gzip-aware by file name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace ringtrain::data {

struct FileBytes {
  std::vector<std::uint8_t> bytes;  // uncompressed content
  bool gzipped = false;             // the file was gzip data (its name ends in .gz)
};

// True when the path's name ends in ".gz".
bool isGzipPath(const std::filesystem::path& path);

// Reads the whole file; a name ending in .gz is inflated (several concatenated gzip members are
// one stream, as gzip -d reads them). Throws DataError, one line naming the file: missing,
// unreadable, a folder, corrupt or truncated gzip data, bytes after the gzip data. The buffer
// grows with the bytes actually read or inflated, never from a size the content claims.
FileBytes readFileBytes(const std::filesystem::path& path);

// Writes `bytes` to `path` (gzip-compressed when the name ends in .gz) through a temporary file in
// the same folder that is renamed over `path` only once it is complete: a reader, or a crash,
// never sees half a file, and an existing file is replaced whole or not at all.
void writeFileAtomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace ringtrain::data
