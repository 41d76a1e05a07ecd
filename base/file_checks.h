// Checks of what a path names, made before it is opened.
//
// open() of a FIFO for reading waits for a writer -- forever when none comes -- and a device or a
// socket is no file of ours either: every reader of a data file, checkpoint, tuning table, profile
// or weights file asks here first (stat() follows symbolic links and never blocks), so that such a
// path is refused with one line instead of hanging the job.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace ringtrain::base {

// Why `path` cannot be read as a regular file, or nullopt when it is one: "no such file",
// "is a folder, not a file", "is a FIFO (named pipe), not a regular file", "is a character device,
// not a regular file" (and block device, socket), "cannot stat it: <errno text>". The caller puts
// its own name for the file in front.
std::optional<std::string> regularFileProblem(const std::filesystem::path& path);

// The same for a folder: "no such folder", "is a FIFO (named pipe), not a folder", "is a file, not
// a folder", "cannot stat it: <errno text>".
std::optional<std::string> folderProblem(const std::filesystem::path& path);

}  // namespace ringtrain::base
