// What a path names, checked before it is opened: a regular file or folder passes; a FIFO, a
// device, a folder where a file is expected (and the reverse) and a missing path get their reason.
#include "base/file_checks.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ringtrain::base {
namespace {

namespace fs = std::filesystem;

class FileChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "file-checks-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    folder_ = pattern;
  }
  void TearDown() override { fs::remove_all(folder_); }
  fs::path folder_;
};

TEST_F(FileChecks, ARegularFileAndAFolderPass) {
  std::ofstream(folder_ / "file") << "x";
  EXPECT_EQ(regularFileProblem(folder_ / "file"), std::nullopt);
  EXPECT_EQ(folderProblem(folder_), std::nullopt);
  fs::create_symlink(folder_ / "file", folder_ / "link");  // links are followed
  EXPECT_EQ(regularFileProblem(folder_ / "link"), std::nullopt);
}

TEST_F(FileChecks, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((folder_ / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(regularFileProblem(folder_ / "fifo"), "is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(folderProblem(folder_ / "fifo"), "is a FIFO (named pipe), not a folder");
}

TEST_F(FileChecks, ADeviceTheWrongKindAndAMissingPathGetTheirReasons) {
  EXPECT_EQ(regularFileProblem("/dev/null"), "is a character device, not a regular file");
  EXPECT_EQ(regularFileProblem(folder_), "is a folder, not a file");
  std::ofstream(folder_ / "file") << "x";
  EXPECT_EQ(folderProblem(folder_ / "file"), "is a file, not a folder");
  EXPECT_EQ(regularFileProblem(folder_ / "none"), "no such file");
  EXPECT_EQ(folderProblem(folder_ / "none"), "no such folder");
  EXPECT_EQ(regularFileProblem(folder_ / "file" / "below"), "cannot stat it: Not a directory");
}

}  // namespace
}  // namespace ringtrain::base
