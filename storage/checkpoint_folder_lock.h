// One writer per checkpoint folder: rank 0 of a run holds an exclusive lock on
// <folder>/.ringtrain.lock from start-up to exit, so a second job started with the same
// --checkpoint-dir is refused before it trains, instead of both writing ckpt-*.h5 and `latest`
// and pruning each other's checkpoints.
//
// The lock is an open file description lock (fcntl F_OFD_SETLK, a POSIX record lock owned by the
// open file rather than by the process): the kernel drops it when the process ends, however it
// ends (SIGKILL included), so a lock file left behind blocks nobody -- its text only says who held
// it last. Unlike a classic F_SETLK lock it is not lost when the process closes some other
// descriptor of the same file, and two holders in one process conflict as two processes do. Being
// a POSIX lock to the file system, it reaches the server on NFS (the NFSv4 protocol's own locks,
// or the lock manager for NFSv3), where flock() may be local to one client.
#pragma once

#include <filesystem>
#include <string>

namespace ringtrain::storage {

// The lock file's name inside the folder. Never removed: removing it would let two writers lock
// two different files of the same name.
inline constexpr const char* kCheckpointLockName = ".ringtrain.lock";

class CheckpointFolderLock {
 public:
  // Creates `folder` if it is missing, checks that a file can be written there (a probe file,
  // written and removed), then takes the lock and writes "host = ...", "pid = ...", "started =
  // ..." into the lock file. Throws CheckpointError, one line naming --checkpoint-dir and the OS
  // error or the holder, when any of that fails.
  CheckpointFolderLock(const std::filesystem::path& folder, const std::string& hostName);
  ~CheckpointFolderLock();
  CheckpointFolderLock(const CheckpointFolderLock&) = delete;
  CheckpointFolderLock& operator=(const CheckpointFolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace ringtrain::storage
