#include "base/file_checks.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace ringtrain::base {
namespace {

// What the mode names, for a message: "a FIFO (named pipe)", "a character device", ...
const char* kindOf(mode_t mode) {
  if (S_ISREG(mode)) return "a file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file or folder";
}

// stat() of the path: its mode, or the problem ("no such ...", "cannot stat it: ...").
std::optional<std::string> statMode(const std::filesystem::path& path, const char* missing,
                                    mode_t& mode) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    mode = info.st_mode;
    return std::nullopt;
  }
  if (errno == ENOENT) return std::string(missing);
  return std::string("cannot stat it: ") + std::strerror(errno);
}

}  // namespace

std::optional<std::string> regularFileProblem(const std::filesystem::path& path) {
  mode_t mode = 0;
  if (auto problem = statMode(path, "no such file", mode)) return problem;
  if (S_ISREG(mode)) return std::nullopt;
  if (S_ISDIR(mode)) return std::string("is a folder, not a file");
  return std::string("is ") + kindOf(mode) + ", not a regular file";
}

std::optional<std::string> folderProblem(const std::filesystem::path& path) {
  mode_t mode = 0;
  if (auto problem = statMode(path, "no such folder", mode)) return problem;
  if (S_ISDIR(mode)) return std::nullopt;
  return std::string("is ") + kindOf(mode) + ", not a folder";
}

}  // namespace ringtrain::base
