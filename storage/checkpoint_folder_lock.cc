#include "storage/checkpoint_folder_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string_view>
#include <thread>

#include "storage/checkpoint.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;

// How long a refused run waits for the holder's text: the holder writes it just after taking the
// lock, so a run that comes in between finds the file empty for a moment.
constexpr int kHolderReadAttempts = 20;
constexpr std::chrono::milliseconds kHolderReadPause{50};
constexpr std::size_t kMaxLockFileBytes = 4096;

[[noreturn]] void refuse(const fs::path& folder, const std::string& what) {
  throw CheckpointError("--checkpoint-dir " + folder.string() + ": " + what);
}

std::string errnoText(int error) {
  return std::strerror(error);
}

void createFolder(const fs::path& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) refuse(folder, "cannot create the folder: " + ec.message());
}

// Found now rather than at the first checkpoint, an epoch later: a folder where no file can be
// created or written (read-only mount, no permission, a path under a file).
void probeWritable(const fs::path& folder) {
  const fs::path probe = folder / (".ringtrain-probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) refuse(folder, "cannot write a file there: " + errnoText(errno));
  const char byte = '\n';
  const bool written = ::write(fd, &byte, 1) == 1;
  const int writeError = errno;
  const bool closed = ::close(fd) == 0;
  const int closeError = errno;
  ::unlink(probe.c_str());
  if (!written) refuse(folder, "cannot write a file there: " + errnoText(writeError));
  if (!closed) refuse(folder, "cannot write a file there: " + errnoText(closeError));
}

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// Whether the whole file is now locked by this open file description; false when another holds
// it. Any other failure (ENOLCK: a network file system without a lock manager) is refused: one
// writer per folder could not be promised.
bool tryLock(int fd, const fs::path& folder) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file, however long
  if (::fcntl(fd, F_OFD_SETLK, &lock) == 0) return true;
  if (errno == EAGAIN || errno == EACCES) return false;
  refuse(folder, std::string("cannot lock ") + kCheckpointLockName + ": " + errnoText(errno));
}

// The value of the "name = value" line of `text`, or "".
std::string field(std::string_view text, std::string_view name) {
  const std::string key = std::string(name) + " = ";
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with(key)) return std::string(line.substr(key.size()));
    at = end + 1;
  }
  return "";
}

std::string readAll(int fd) {
  std::string text(kMaxLockFileBytes, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return text;
}

// "host H, pid P, started T" from the holder's lock file.
std::string describeHolder(int fd) {
  for (int attempt = 0; attempt < kHolderReadAttempts; ++attempt) {
    const std::string text = readAll(fd);
    const std::string host = field(text, "host");
    const std::string pid = field(text, "pid");
    const std::string started = field(text, "started");
    if (!host.empty() && !pid.empty() && !started.empty()) {
      return "host " + host + ", pid " + pid + ", started " + started;
    }
    std::this_thread::sleep_for(kHolderReadPause);
  }
  return "which has not written its host and pid into " + std::string(kCheckpointLockName);
}

// Synced, so that a run on another NFS client that is refused can read who holds the folder.
void writeHolder(int fd, const fs::path& folder, const std::string& hostName) {
  const std::string text = "host = " + hostName + "\npid = " + std::to_string(::getpid()) +
                           "\nstarted = " + utcNow() + "\n";
  const bool written =
      ::ftruncate(fd, 0) == 0 &&
      ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
      ::fsync(fd) == 0;
  if (!written) {
    refuse(folder, std::string("cannot write ") + kCheckpointLockName + ": " + errnoText(errno));
  }
}

}  // namespace

CheckpointFolderLock::CheckpointFolderLock(const fs::path& folder, const std::string& hostName) {
  createFolder(folder);
  probeWritable(folder);
  const fs::path file = folder / kCheckpointLockName;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) refuse(folder, "cannot open " + file.string() + ": " + errnoText(errno));
  try {
    if (!tryLock(fd_, folder)) {
      throw CheckpointError("--checkpoint-dir " + folder.string() + " is in use by another run (" +
                            describeHolder(fd_) + "): wait for it, or use another folder");
    }
    writeHolder(fd_, folder, hostName);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

CheckpointFolderLock::~CheckpointFolderLock() {
  // Closing the only descriptor of the open file description releases the lock; the file stays.
  ::close(fd_);
}

}  // namespace ringtrain::storage
