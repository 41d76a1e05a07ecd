// Durable file operations: bytes that are on the disk when the call returns, and renames that
// survive a crash or a power cut.
//
// A file written and renamed into place is only safe once the file's data was fsynced before the
// rename and the folder was fsynced after it (the rename is an entry in the folder). Writers of
// files that must survive (HDF5 datasets, checkpoints and their `latest` pointer) go through
// these; each failure throws FormatError with one line naming the file and errno's text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

namespace ringtrain::formats {

// Creates `path` (which must not exist: O_EXCL), writes every byte, fsyncs and closes it.
void writeNewFileDurably(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

// fsync of a file another library wrote and closed (HDF5, say).
void syncFile(const std::filesystem::path& path);

// fsync of a folder: makes the creations, renames and removals of its entries durable.
void syncFolder(const std::filesystem::path& folder);

// rename(from, to), then syncFolder of the target's folder. Both must be in the same folder (or
// at least the same file system) for the rename to be atomic.
void renameDurably(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace ringtrain::formats
