// Whole-file reads and atomic writes (formats/file_bytes.h): content read only as far as asked,
// and a write that replaces a file whole or leaves it alone. Every way a .gz file can be damaged
// is tested through the IDX reader (tests/data/idx_reader_test.cc).
#include "formats/file_bytes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/format_error.h"
#include "tests/formats/format_test_support.h"

namespace ringtrain::formats {
namespace {

using testing::readRaw;
using testing::TempFolder;
using testing::writeRaw;

TEST(FileContentTest, InflatesOnlyAsFarAsAsked) {
  TempFolder folder;
  writeFileAtomically(folder / "zeros.gz", std::vector<std::uint8_t>(std::size_t{8} << 20, 0));
  FileContent file(folder / "zeros.gz");
  EXPECT_TRUE(file.gzipped());
  EXPECT_EQ(file.maxContentBytes(), 1032 * file.fileBytes());
  EXPECT_EQ(file.readUpTo(10).size(), 10u);
  EXPECT_EQ(file.readUpTo(1000).size(), 1000u);
  const std::vector<std::uint8_t> content = file.take();
  EXPECT_EQ(content.size(), 1000u);
}

TEST(FileContentTest, APlainFileIsItsOwnContent) {
  TempFolder folder;
  writeRaw(folder / "plain", std::vector<std::uint8_t>{1, 2, 3, 4, 5});
  FileContent file(folder / "plain");
  EXPECT_FALSE(file.gzipped());
  EXPECT_EQ(file.maxContentBytes(), 5u);
  EXPECT_EQ(file.readUpTo(3).size(), 3u);
  EXPECT_EQ(file.readUpTo(100).size(), 5u);
  EXPECT_EQ(file.take(), (std::vector<std::uint8_t>{1, 2, 3, 4, 5}));
}

TEST(FileBytesTest, AtomicWriteReplacesTheWholeFileAndLeavesNoTemporary) {
  TempFolder folder;
  const auto path = folder / "labels";
  writeFileAtomically(path, std::vector<std::uint8_t>{1, 2, 3});
  writeFileAtomically(path, std::vector<std::uint8_t>{4});
  EXPECT_EQ(readRaw(path), std::vector<std::uint8_t>{4});
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(folder.path())) {
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(FileBytesTest, FailedWriteLeavesTheOldFileAlone) {
  TempFolder folder;
  EXPECT_THROW(
      writeFileAtomically(folder / "missing-folder" / "labels", std::vector<std::uint8_t>{1}),
      FormatError);
  // A folder where the file should go: the rename fails and the folder stays as it was.
  std::filesystem::create_directory(folder / "taken");
  std::filesystem::create_directory(folder / "taken" / "inside");
  EXPECT_THROW(writeFileAtomically(folder / "taken", std::vector<std::uint8_t>{1}), FormatError);
  EXPECT_TRUE(std::filesystem::is_directory(folder / "taken" / "inside"));
  EXPECT_FALSE(std::filesystem::exists(folder.path().string() + "/taken.partial-" +
                                       std::to_string(getpid())));
}

}  // namespace
}  // namespace ringtrain::formats
