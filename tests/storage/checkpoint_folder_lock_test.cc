// The checkpoint folder's lock: one holder at a time, a refusal that names the holder, a lock file
// of a killed holder that blocks nobody, and a folder that cannot be written refused at once.
#include "storage/checkpoint_folder_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "storage/checkpoint.h"
#include "tests/formats/format_test_support.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
using formats::testing::TempFolder;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

std::string lockErrorOf(const fs::path& folder) {
  return formats::testing::errorOf([&] { CheckpointFolderLock lock(folder, "other-host"); });
}

std::string textOf(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CheckpointFolderLockTest, CreatesTheFolderAndNamesItsHolderInTheLockFile) {
  TempFolder folder;
  const CheckpointFolderLock lock(folder / "a" / "ck", "trainer-host");
  EXPECT_THAT(textOf(folder / "a" / "ck" / kCheckpointLockName),
              MatchesRegex("host = trainer-host\npid = " + std::to_string(getpid()) +
                           "\nstarted = 20[0-9-]+T[0-9:]+Z\n"));
}

// Open file description locks conflict within one process too, so the second holder can be
// played by this test itself.
TEST(CheckpointFolderLockTest, ASecondHolderIsRefusedNamingTheFirstUntilItLetsGo) {
  TempFolder folder;
  std::optional<CheckpointFolderLock> first;
  first.emplace(folder.path(), "first-host");
  EXPECT_THAT(
      lockErrorOf(folder.path()),
      MatchesRegex("--checkpoint-dir " + folder.path().string() +
                   " is in use by another run \\(host first-host, pid " + std::to_string(getpid()) +
                   ", started [0-9T:Z-]+\\): wait for it, or use another folder"));
  first.reset();
  const CheckpointFolderLock second(folder.path(), "second-host");
  EXPECT_THAT(textOf(folder / kCheckpointLockName), StartsWith("host = second-host\n"));
}

// A holder killed with SIGKILL runs no destructor: the kernel drops its lock, and the file it
// leaves (which still names it) blocks nobody.
TEST(CheckpointFolderLockTest, TheLockOfAKilledHolderDiesWithIt) {
  TempFolder folder;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const CheckpointFolderLock lock(folder.path(), "doomed-host");
    const char byte = 'x';
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  EXPECT_THAT(lockErrorOf(folder.path()),
              HasSubstr("(host doomed-host, pid " + std::to_string(child) + ", started "));
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_THAT(textOf(folder / kCheckpointLockName), StartsWith("host = doomed-host\n"));
  const CheckpointFolderLock next(folder.path(), "next-host");
  EXPECT_THAT(textOf(folder / kCheckpointLockName), StartsWith("host = next-host\n"));
}

// Permission bits do not stop root (tests run as root in CI): these fail for root too.
TEST(CheckpointFolderLockTest, AFolderThatCannotBeWrittenIsRefusedWithTheOsError) {
  TempFolder folder;
  std::ofstream(folder / "a-file") << "not a folder\n";
  EXPECT_EQ(lockErrorOf(folder / "a-file" / "ck"),
            "--checkpoint-dir " + (folder / "a-file" / "ck").string() +
                ": cannot create the folder: Not a directory");
  if (fs::is_directory("/proc/self")) {
    EXPECT_THAT(lockErrorOf("/proc/self"),
                StartsWith("--checkpoint-dir /proc/self: cannot write a file there: "));
  }
}

}  // namespace
}  // namespace ringtrain::storage
