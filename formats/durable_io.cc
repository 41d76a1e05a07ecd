#include "formats/durable_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "formats/format_error.h"

namespace ringtrain::formats {
namespace {

[[noreturn]] void failErrno(const std::filesystem::path& path, const std::string& what) {
  throw FormatError(path.string() + ": " + what + ": " + std::strerror(errno));
}

// Closes on scope exit unless released; close() reports the error of an explicit close.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

void syncOpened(const std::filesystem::path& path, int flags, const char* what) {
  FileDescriptor fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (fd.get() < 0) failErrno(path, std::string("cannot open to sync ") + what);
  if (::fsync(fd.get()) != 0) failErrno(path, std::string("fsync of the ") + what + " failed");
  if (::close(fd.release()) != 0) failErrno(path, std::string("close of the ") + what + " failed");
}

}  // namespace

void writeNewFileDurably(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) failErrno(path, "cannot create");
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failErrno(path, "write failed after " + std::to_string(written) + " of " +
                          std::to_string(bytes.size()) + " bytes");
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) failErrno(path, "fsync failed");
  // close can report a delayed write error (NFS does): a file is only good once it closed well.
  if (::close(fd.release()) != 0) failErrno(path, "close failed");
}

void syncFile(const std::filesystem::path& path) {
  syncOpened(path, O_RDONLY, "file");
}

void syncFolder(const std::filesystem::path& folder) {
  syncOpened(folder.empty() ? std::filesystem::path(".") : folder, O_RDONLY | O_DIRECTORY,
             "folder");
}

void renameDurably(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    failErrno(to, "cannot rename " + from.filename().string() + " to it");
  }
  syncFolder(to.parent_path());
}

}  // namespace ringtrain::formats
