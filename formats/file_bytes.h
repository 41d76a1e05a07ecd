// Whole-file reads and atomic writes, gzip-aware by file name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

namespace ringtrain::formats {

// Deflate (gzip's compression) expands data at most 1032 times: a 258-byte match costs at least
// two bits. A gzip file of C bytes -- headers and trailers included, which hold no content -- so
// inflates to at most 1032 * C bytes; a header that claims more is forged or damaged.
inline constexpr std::uint64_t kMaxDeflateExpansion = 1032;

// True when the path's name ends in ".gz".
bool isGzipPath(const std::filesystem::path& path);

// A file's content: read whole, and inflated when the name ends in .gz -- but only as far as the
// caller asks. A reader learns from a header how long the content should be, refuses a length
// the file cannot hold (maxContentBytes), and asks for one byte more than that length: a small
// forged .gz (a "gzip bomb") then costs what its header honestly allows, never what it inflates
// to. Several concatenated gzip members are one stream, as gzip -d reads them. Errors throw
// FormatError, one line naming the file: missing, unreadable, a folder, not gzip data under a .gz
// name, corrupt or truncated gzip data, bytes after the gzip data. Buffers grow with the bytes
// actually read or inflated, never from a size the content claims.
class FileContent {
 public:
  explicit FileContent(const std::filesystem::path& path);
  ~FileContent();
  FileContent(const FileContent&) = delete;
  FileContent& operator=(const FileContent&) = delete;

  bool gzipped() const { return inflater_ != nullptr; }
  // The size of the file itself (for a .gz file: compressed).
  std::uint64_t fileBytes() const { return raw_.size(); }
  // The most content the file can hold: its size, or kMaxDeflateExpansion times that for gzip.
  std::uint64_t maxContentBytes() const;

  // The first `count` bytes of the content, or all of it when it is shorter (a shorter answer
  // means the content ends there). A .gz file is inflated only as far as needed, and the end of
  // its stream (trailer, further members, bytes after them) is checked once it is reached.
  std::span<const std::uint8_t> readUpTo(std::uint64_t count);

  // The content returned by the last readUpTo, moved out; the object is spent.
  std::vector<std::uint8_t> take();

 private:
  class Inflater;  // keeps zlib out of this header

  std::filesystem::path path_;
  std::vector<std::uint8_t> raw_;  // the file's bytes (the content itself, when not gzipped)
  std::size_t asked_ = 0;          // plain file: how much of raw_ readUpTo handed out
  std::unique_ptr<Inflater> inflater_;
};

// Writes `bytes` to `path` (gzip-compressed when the name ends in .gz) through a temporary file in
// the same folder that is renamed over `path` only once it is complete: a reader, or a crash,
// never sees half a file, and an existing file is replaced whole or not at all.
void writeFileAtomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace ringtrain::formats
