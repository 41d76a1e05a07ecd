// Checkpoints: round trips, the folder's bookkeeping (file names, `latest`, keep-N, stale
// temporaries), one exact message for every way a file can be damaged, auto resume past bad
// files, and a writer killed at every stage of a write leaving a resumable folder.
#include "storage/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "formats/hdf5_support.h"
#include "models/model_factory.h"
#include "storage/checkpoint_model.h"
#include "tests/formats/format_test_support.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
using formats::testing::readRaw;
using formats::testing::TempFolder;
using formats::testing::writeRaw;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Tensor tensor(std::string name, std::vector<std::int64_t> shape, float first) {
  Tensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  std::size_t count = 1;
  for (const auto d : t.shape)
    count *= static_cast<std::size_t>(d);
  for (std::size_t i = 0; i < count; ++i)
    t.values.push_back(first + 0.25f * static_cast<float>(i));
  return t;
}

const char* const kLayout = "model mlp\nfc1 linear 4->3\nfc1.weight {3,4} offset 0\n";

CheckpointContent sampleContent(std::int64_t step) {
  CheckpointContent c;
  c.step = step;
  c.epoch = step / 10;
  c.sampler = {step / 10, step % 10};
  c.seed = 0xfedcba9876543210ULL;  // above 2^63: stored unsigned
  c.rngState = {1, 2, 0xffffffffffffffffULL};
  c.worldSize = 4;
  c.batchSize = 64;
  c.optimizerKind = "adam";
  c.optimizerSteps = step;
  c.config = "batch-size = 64\nlr = 0.1\nmodel = mlp\n";
  c.modelLayout = kLayout;
  c.parameters = {tensor("fc1.weight", {3, 4}, 1.0f), tensor("fc1.bias", {3}, -2.0f),
                  tensor("scale", {}, 7.0f)};
  c.optimizerState = {tensor("exp_avg", {15}, 0.5f), tensor("exp_avg_sq", {15}, 0.125f)};
  c.parameters[0].values[5] = std::numeric_limits<float>::quiet_NaN();  // bits survive too
  return c;
}

void expectSame(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.shape, b.shape);
  ASSERT_EQ(a.values.size(), b.values.size()) << a.name;
  // memcmp of an empty tensor would pass null pointers (undefined, and UBSan says so).
  EXPECT_TRUE(a.values.empty() ||
              std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0)
      << a.name;
}

void expectSame(const CheckpointContent& a, const CheckpointContent& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.sampler, b.sampler);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.rngState, b.rngState);
  EXPECT_EQ(a.worldSize, b.worldSize);
  EXPECT_EQ(a.batchSize, b.batchSize);
  EXPECT_EQ(a.optimizerKind, b.optimizerKind);
  EXPECT_EQ(a.optimizerSteps, b.optimizerSteps);
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.modelLayout, b.modelLayout);
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  for (std::size_t i = 0; i < a.parameters.size(); ++i)
    expectSame(a.parameters[i], b.parameters[i]);
  ASSERT_EQ(a.optimizerState.size(), b.optimizerState.size());
  for (std::size_t i = 0; i < a.optimizerState.size(); ++i)
    expectSame(a.optimizerState[i], b.optimizerState[i]);
}

std::vector<std::string> folderNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string latestOf(const fs::path& dir) {
  const auto bytes = readRaw(dir / "latest");
  return std::string(bytes.begin(), bytes.end());
}

// Checkpoint errors are FormatErrors: the file tests' helper checks the message is one line.
// One checkpoint by a writer of its own, as a run that writes one: it prunes nothing else.
CheckpointWriteResult writeOne(const fs::path& dir, const CheckpointContent& content) {
  return CheckpointWriter(dir, 1).write(content);
}

std::string checkpointErrorOf(const std::function<void()>& action) {
  return formats::testing::errorOf(action);
}

// ---- Round trips and the folder ---------------------------------------------------------------

TEST(CheckpointTest, RoundTripKeepsEveryFieldToTheBit) {
  TempFolder folder;
  const CheckpointContent saved = sampleContent(1234);
  const CheckpointWriteResult result = writeOne(folder / "ckpt", saved);
  EXPECT_EQ(result.path, folder / "ckpt/ckpt-00001234.h5");
  EXPECT_TRUE(result.warnings.empty());
  expectSame(readCheckpoint(result.path, kLayout), saved);
  EXPECT_THAT(folderNames(folder / "ckpt"), ElementsAre("ckpt-00001234.h5", "latest"));
  EXPECT_EQ(latestOf(folder / "ckpt"), "ckpt-00001234.h5\n");
}

TEST(CheckpointTest, EmptyTextsAndNoOptimizerStateRoundTrip) {
  TempFolder folder;
  CheckpointContent saved;
  saved.parameters = {tensor("w", {0}, 0.0f)};
  const auto path = writeOne(folder.path(), saved).path;
  expectSame(readCheckpoint(path), saved);
}

// The header sits in HDF5's user block: the file is an ordinary HDF5 file for h5dump and h5py.
TEST(CheckpointTest, IsAPlainHdf5FileWithTheTensorsNamedAndShaped) {
  TempFolder folder;
  const auto path = writeOne(folder.path(), sampleContent(7)).path;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t dataset = H5Dopen2(file, "/parameters/fc1.weight", H5P_DEFAULT);
  ASSERT_GE(dataset, 0);
  const hid_t space = H5Dget_space(dataset);
  hsize_t dims[2] = {};
  EXPECT_EQ(H5Sget_simple_extent_dims(space, dims, nullptr), 2);
  EXPECT_EQ(dims[0], 3u);
  EXPECT_EQ(dims[1], 4u);
  H5Sclose(space);
  H5Dclose(dataset);
  EXPECT_GE(H5Oexists_by_name(file, "/optimizer/exp_avg_sq", H5P_DEFAULT), 1);
  H5Fclose(file);
}

TEST(CheckpointTest, KeepsTheNewestAndRemovesTheRestOnlyAfterTheNewIsComplete) {
  TempFolder folder;
  CheckpointWriter writer(folder.path(), 3);
  for (std::int64_t step = 100; step <= 600; step += 100)
    writer.write(sampleContent(step));
  EXPECT_THAT(folderNames(folder.path()),
              ElementsAre("ckpt-00000400.h5", "ckpt-00000500.h5", "ckpt-00000600.h5", "latest"));
  // keep 0 keeps everything.
  CheckpointWriter(folder.path(), 0).write(sampleContent(700));
  EXPECT_EQ(folderNames(folder.path()).size(), 5u);
}

// --keep must not lose what was saved before the run: another run's checkpoint in the folder (or
// the one this run resumed from) stays, however many of its own the writer prunes.
TEST(CheckpointTest, OnlyTheWritersOwnCheckpointsArePruned) {
  TempFolder folder;
  writeOne(folder.path(), sampleContent(50));  // another run's
  CheckpointWriter writer(folder.path(), 2);
  CheckpointWriteResult result;
  for (std::int64_t step = 100; step <= 400; step += 100)
    result = writer.write(sampleContent(step));
  EXPECT_THAT(folderNames(folder.path()),
              ElementsAre("ckpt-00000050.h5", "ckpt-00000300.h5", "ckpt-00000400.h5", "latest"));
  EXPECT_THAT(result.removed, ElementsAre(folder / "ckpt-00000200.h5"));
  EXPECT_THAT(result.keptOthers, ElementsAre(folder / "ckpt-00000050.h5"));
  // keep 1, the other run's checkpoint of a higher step: it stays too.
  writeOne(folder.path(), sampleContent(900));
  CheckpointWriter(folder.path(), 1).write(sampleContent(500));
  EXPECT_THAT(folderNames(folder.path()),
              ElementsAre("ckpt-00000050.h5", "ckpt-00000300.h5", "ckpt-00000400.h5",
                          "ckpt-00000500.h5", "ckpt-00000900.h5", "latest"));
}

TEST(CheckpointTest, ANewCheckpointOfAnEarlierStepIsNeverTheOnePruned) {
  TempFolder folder;
  CheckpointWriter writer(folder.path(), 2);
  writer.write(sampleContent(300));
  writer.write(sampleContent(400));
  // The writer, gone back to an older state, writes step 350 next.
  const auto result = writer.write(sampleContent(350));
  EXPECT_THAT(folderNames(folder.path()),
              ElementsAre("ckpt-00000350.h5", "ckpt-00000400.h5", "latest"));
  EXPECT_THAT(result.removed, ElementsAre(folder / "ckpt-00000300.h5"));
  EXPECT_EQ(latestOf(folder.path()), "ckpt-00000350.h5\n");
}

TEST(CheckpointTest, RewritingAStepReplacesIt) {
  TempFolder folder;
  writeOne(folder.path(), sampleContent(5));
  CheckpointContent again = sampleContent(5);
  again.epoch = 42;
  writeOne(folder.path(), again);
  EXPECT_EQ(readCheckpoint(folder / "ckpt-00000005.h5").epoch, 42);
}

TEST(CheckpointTest, TemporariesOfADeadWriterAreRemovedByTheNextWrite) {
  TempFolder folder;
  const std::vector<std::uint8_t> junk = {1, 2, 3};
  writeRaw(folder / ".ckpt-00000200.h5.tmp-99999", junk);
  writeRaw(folder / ".latest.tmp-99999", junk);
  writeRaw(folder / "notes.txt", junk);
  const auto result = writeOne(folder.path(), sampleContent(300));
  EXPECT_THAT(folderNames(folder.path()), ElementsAre("ckpt-00000300.h5", "latest", "notes.txt"));
  EXPECT_EQ(result.removed.size(), 2u);
}

TEST(CheckpointTest, ContentThatCannotBeStoredIsAnInvalidArgument) {
  TempFolder folder;
  CheckpointContent c = sampleContent(1);
  c.parameters[0].shape = {4, 4};  // 12 values
  EXPECT_THROW(writeOne(folder.path(), c), std::invalid_argument);
  c = sampleContent(1);
  c.parameters[1].name = "fc1/bias";
  EXPECT_THROW(writeOne(folder.path(), c), std::invalid_argument);
  c = sampleContent(1);
  c.parameters[1].name = c.parameters[0].name;
  EXPECT_THROW(writeOne(folder.path(), c), std::invalid_argument);
  EXPECT_TRUE(folderNames(folder.path()).empty());
}

TEST(CheckpointTest, AFolderThatCannotBeCreatedIsACheckpointError) {
  TempFolder folder;
  writeRaw(folder / "file", std::vector<std::uint8_t>{1});
  EXPECT_THAT(checkpointErrorOf([&] { writeOne(folder / "file/sub", sampleContent(1)); }),
              StartsWith((folder / "file/sub").string() + ": cannot create the checkpoint folder"));
}

// ---- Damaged files ------------------------------------------------------------------------------

class DamagedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = writeOne(folder_.path(), sampleContent(10)).path;
    bytes_ = readRaw(path_);
  }
  std::string errorAfter(const std::function<void(std::vector<std::uint8_t>&)>& damage) {
    std::vector<std::uint8_t> bytes = bytes_;
    damage(bytes);
    writeRaw(path_, bytes);
    return checkpointErrorOf([&] { readCheckpoint(path_); });
  }
  // A header for `image` written here from the documented layout, with the test's own CRC.
  static std::vector<std::uint8_t> withHeader(const std::vector<std::uint8_t>& image,
                                              std::int64_t step, std::uint32_t version = 2) {
    std::vector<std::uint8_t> file(512 + image.size(), 0);
    std::memcpy(file.data(), "ringtrain-ckpt", 14);
    const auto put = [&](std::size_t at, std::uint64_t v, int n) {
      for (int i = 0; i < n; ++i)
        file[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
    };
    put(16, version, 4);
    put(20, 512, 4);
    put(24, image.size(), 8);
    put(32, formats::testing::referenceCrc32c(image), 4);
    put(36, static_cast<std::uint64_t>(step), 8);
    put(44, formats::testing::referenceCrc32c(std::span(file).first(44)), 4);
    std::copy(image.begin(), image.end(), file.begin() + 512);
    return file;
  }
  std::string name() const { return path_.string(); }

  TempFolder folder_;
  fs::path path_;
  std::vector<std::uint8_t> bytes_;
};

TEST_F(DamagedCheckpointTest, TheHeaderIsTheDocumentedOne) {
  const std::vector<std::uint8_t> image(bytes_.begin() + 512, bytes_.end());
  EXPECT_EQ(withHeader(image, 10), bytes_);
}

// open() of a FIFO waits for a writer forever: a FIFO checkpoint is refused before it is opened,
// and a FIFO `latest` (only a hint) is passed over.
TEST(CheckpointTest, AFifoIsRefusedOrPassedOverWithoutBlocking) {
  TempFolder folder;
  ASSERT_EQ(::mkfifo((folder / "ckpt-00000009.h5").c_str(), 0600), 0);
  EXPECT_EQ(
      checkpointErrorOf([&] { readCheckpoint(folder / "ckpt-00000009.h5"); }),
      (folder / "ckpt-00000009.h5").string() + ": is a FIFO (named pipe), not a regular file");
  writeOne(folder.path(), sampleContent(5));
  fs::remove(folder / "latest");
  ASSERT_EQ(::mkfifo((folder / "latest").c_str(), 0600), 0);
  const auto plan = findCheckpointToResume(folder.path(), kLayout);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->content.step, 5);
  EXPECT_THAT(plan->skipped, ElementsAre(HasSubstr("ckpt-00000009.h5: is a FIFO")));
}

TEST_F(DamagedCheckpointTest, MissingFile) {
  EXPECT_EQ(checkpointErrorOf([&] { readCheckpoint(folder_ / "none.h5"); }),
            (folder_ / "none.h5").string() + ": no such file");
}

TEST_F(DamagedCheckpointTest, EmptyFile) {
  EXPECT_EQ(errorAfter([](auto& b) { b.clear(); }),
            name() + ": empty file (0 bytes); not a checkpoint");
}

TEST_F(DamagedCheckpointTest, TruncatedHeader) {
  EXPECT_EQ(errorAfter([](auto& b) { b.resize(100); }),
            name() + ": truncated: 100 bytes, less than the 512-byte checkpoint header");
}

TEST_F(DamagedCheckpointTest, TruncatedData) {
  const std::size_t image = bytes_.size() - 512;
  EXPECT_EQ(errorAfter([](auto& b) { b.resize(b.size() - 10); }),
            name() + ": truncated: the header says " + std::to_string(image) +
                " bytes of HDF5 data follow but the file has " + std::to_string(image - 10));
}

TEST_F(DamagedCheckpointTest, TrailingBytes) {
  const std::size_t image = bytes_.size() - 512;
  EXPECT_EQ(errorAfter([](auto& b) { b.push_back(0); }),
            name() + ": trailing bytes: the header says " + std::to_string(image) +
                " bytes of HDF5 data follow but the file has " + std::to_string(image + 1));
}

TEST_F(DamagedCheckpointTest, AFlippedBitAnywhereInTheData) {
  for (const std::size_t at : {std::size_t{512}, bytes_.size() / 2, bytes_.size() - 1}) {
    EXPECT_THAT(errorAfter([&](auto& b) { b[at] ^= 0x10; }),
                ::testing::MatchesRegex(".*: checksum mismatch: the data has CRC-32C 0x[0-9a-f]{8} "
                                        "but the header says 0x[0-9a-f]{8} \\(the file is "
                                        "damaged\\)"))
        << "byte " << at;
  }
}

TEST_F(DamagedCheckpointTest, AFlippedBitInTheHeader) {
  EXPECT_EQ(errorAfter([](auto& b) { b[25] ^= 1; }),
            name() + ": damaged checkpoint header (checksum mismatch)");
}

TEST_F(DamagedCheckpointTest, NotACheckpoint) {
  EXPECT_EQ(errorAfter([](auto& b) { std::memcpy(b.data(), "hello, world", 12); }),
            name() + ": not a ringtrain checkpoint (no ringtrain-ckpt header)");
}

TEST_F(DamagedCheckpointTest, AnHdf5FileWithoutTheHeader) {
  EXPECT_EQ(errorAfter([](auto& b) { b.erase(b.begin(), b.begin() + 512); }),
            name() + ": an HDF5 file but not a ringtrain checkpoint (no ringtrain-ckpt header)");
}

TEST_F(DamagedCheckpointTest, AnotherFormatVersion) {
  const std::vector<std::uint8_t> image(bytes_.begin() + 512, bytes_.end());
  EXPECT_EQ(errorAfter([&](auto& b) { b = withHeader(image, 10, 1); }),
            name() + ": checkpoint format version 1; this ringtrain reads version 2");
}

TEST_F(DamagedCheckpointTest, AnotherModelLayout) {
  const std::string other = "model mlp\nfc1 linear 4->5\nfc1.weight {5,4} offset 0\n";
  EXPECT_EQ(checkpointErrorOf([&] { readCheckpoint(path_, other); }),
            name() +
                ": saved from another model layout: line 2 is \"fc1 linear 4->3\" in the "
                "checkpoint but \"fc1 linear 4->5\" in this run");
}

// A header and checksum that are right around HDF5 data that is not a checkpoint: what only a
// deliberately forged file (or a bug) could produce; the reader still names what is missing.
TEST_F(DamagedCheckpointTest, ValidChecksumAroundAnHdf5FileWithoutParameters) {
  {
    formats::testing::RawHdf5File file(folder_ / "plain.h5");
    file.integerAttribute("step", 10);
  }
  const auto image = readRaw(folder_ / "plain.h5");
  EXPECT_EQ(errorAfter([&](auto& b) { b = withHeader(image, 10); }),
            name() + ": not a ringtrain checkpoint (no format attribute)");
}

TEST_F(DamagedCheckpointTest, ValidChecksumAroundARandomImage) {
  std::vector<std::uint8_t> image(4096);
  for (std::size_t i = 0; i < image.size(); ++i)
    image[i] = static_cast<std::uint8_t>(i * 131 + 7);
  EXPECT_THAT(errorAfter([&](auto& b) { b = withHeader(image, 10); }),
              StartsWith(name() + ": the HDF5 part does not open (HDF5: H5Fopen: unable to open "
                                  "file"));
}

// Forged files whose checksums are right: the lists beside /parameters and /optimizer must name
// exactly the groups' tensors (the reader opens tensors by those names and never lists a group),
// and no tensor may claim more values than the file has bytes for.
class ForgedCheckpointTest : public DamagedCheckpointTest {
 protected:
  // The checkpoint's HDF5 part edited with the HDF5 library, then given a valid header again.
  std::string errorAfterEditing(const std::function<void(hid_t)>& edit) {
    const fs::path image = folder_ / "image.h5";
    writeRaw(image, std::vector<std::uint8_t>(bytes_.begin() + 512, bytes_.end()));
    const hid_t file = H5Fopen(image.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(file, 0);
    edit(file);
    EXPECT_GE(H5Fclose(file), 0);
    const std::vector<std::uint8_t> edited = readRaw(image);
    return errorAfter([&](auto& b) { b = withHeader(edited, 10); });
  }
  // A one-dimensional float32 dataset of `values` values, never written: HDF5 stores no bytes.
  static void addUnwrittenTensor(hid_t file, const char* path, hsize_t values) {
    const hid_t space = H5Screate_simple(1, &values, nullptr);
    const hid_t tensor =
        H5Dcreate2(file, path, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(tensor, 0);
    H5Dclose(tensor);
    H5Sclose(space);
  }
  std::string errorWithList(const char* list, const std::string& text) {
    return errorAfterEditing([&](hid_t file) {
      EXPECT_GE(H5Ldelete(file, list, H5P_DEFAULT), 0);
      formats::hdf5::writeStringDataset(file, list, text, "forged");
    });
  }
};

TEST_F(ForgedCheckpointTest, AListThatLeavesOutATensor) {
  EXPECT_EQ(errorWithList("parameter_names", "fc1.weight\nscale\n"),
            name() + ": /parameters has 3 members but /parameter_names names 2");
}

TEST_F(ForgedCheckpointTest, AGroupMemberThatNoListNames) {
  EXPECT_EQ(errorAfterEditing([](hid_t file) { addUnwrittenTensor(file, "optimizer/extra", 1); }),
            name() + ": /optimizer has 3 members but /optimizer_state_names names 2");
}

TEST_F(ForgedCheckpointTest, AListThatNamesATensorTwice) {
  EXPECT_EQ(errorWithList("parameter_names", "fc1.weight\nfc1.bias\nfc1.weight\n"),
            name() + ": /parameter_names names \"fc1.weight\" twice");
}

TEST_F(ForgedCheckpointTest, AListThatNamesSomethingElse) {
  EXPECT_THAT(errorWithList("parameter_names", "fc1.weight\nfc1.bias\nbias\n"),
              StartsWith(name() + ": /parameters/bias is not a dataset (HDF5: "));
  EXPECT_EQ(errorWithList("parameter_names", "fc1.weight\n../scale\nscale\n"),
            name() + ": /parameter_names holds a name that is not a tensor name: \"../scale\"");
}

TEST_F(ForgedCheckpointTest, AListWithoutItsFinalNewline) {
  EXPECT_EQ(errorWithList("parameter_names", "fc1.weight\nfc1.bias\nscale"),
            name() + ": /parameter_names does not end in a newline");
}

TEST_F(ForgedCheckpointTest, NoList) {
  EXPECT_EQ(errorAfterEditing([](hid_t file) {
              EXPECT_GE(H5Ldelete(file, "optimizer_state_names", H5P_DEFAULT), 0);
            }),
            name() + ": no dataset optimizer_state_names");
}

// A link message of /parameters that does not decode (its version byte damaged). libhdf5 1.10
// frees uninitialised pointers when it lists such a group by index (the fuzzer found it: a crash);
// the reader never lists a group, and the lookup of the tensor by name fails cleanly.
TEST_F(ForgedCheckpointTest, AnUndecodableLinkMessage) {
  std::vector<std::uint8_t> image(bytes_.begin() + 512, bytes_.end());
  const std::string link = std::string("\x08") + "fc1.bias";  // the name's length, the name
  const auto at = std::search(image.begin(), image.end(), link.begin(), link.end());
  ASSERT_NE(at, image.end());
  // The message: version 1, flags 0x04 (a creation order follows), the 8-byte creation order,
  // the name's length.
  ASSERT_EQ(*(at - 10), 1);
  ASSERT_EQ(*(at - 9), 0x04);
  *(at - 10) = 9;
  EXPECT_THAT(errorAfter([&](auto& b) { b = withHeader(image, 10); }),
              StartsWith(name() + ": /parameters/fc1.bias is not a dataset (HDF5: "));
}

// A tensor of 2^30 values that were never written: HDF5 stores no bytes for it, and the reader
// must not allocate 4 GiB on the file's word.
TEST_F(ForgedCheckpointTest, ATensorLargerThanTheFile) {
  EXPECT_EQ(errorAfterEditing([](hid_t file) {
              addUnwrittenTensor(file, "parameters/huge", hsize_t{1} << 30);
              EXPECT_GE(H5Ldelete(file, "parameter_names", H5P_DEFAULT), 0);
              formats::hdf5::writeStringDataset(file, "parameter_names",
                                                "fc1.weight\nfc1.bias\nscale\nhuge\n", "forged");
            }),
            name() + ": /parameters/huge claims more values than the file has room for");
}

// ---- Resuming ----------------------------------------------------------------------------------

TEST(ResumeTest, NothingToResumeInAMissingOrEmptyFolder) {
  TempFolder folder;
  EXPECT_FALSE(findCheckpointToResume(folder / "none"));
  EXPECT_FALSE(findCheckpointToResume(folder.path()));
  EXPECT_FALSE(resolveResume("auto", folder.path()));
}

TEST(ResumeTest, AutoTakesTheNewestGoodOneAndSaysWhatItSkipped) {
  TempFolder folder;
  for (const std::int64_t step : {100, 200, 300})
    writeOne(folder.path(), sampleContent(step));
  auto bytes = readRaw(folder / "ckpt-00000300.h5");
  bytes[bytes.size() / 2] ^= 0xff;
  writeRaw(folder / "ckpt-00000300.h5", bytes);

  const std::optional<ResumePlan> plan = findCheckpointToResume(folder.path(), kLayout);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->path, folder / "ckpt-00000200.h5");
  EXPECT_EQ(plan->content.step, 200);
  ASSERT_EQ(plan->skipped.size(), 1u);
  EXPECT_THAT(plan->skipped[0],
              StartsWith((folder / "ckpt-00000300.h5").string() + ": checksum mismatch"));
  EXPECT_EQ(plan->latest, "ckpt-00000300.h5");
  EXPECT_THAT(describeResume(*plan),
              StartsWith("resuming from " + (folder / "ckpt-00000200.h5").string() +
                         " (step 200, epoch 20, written by 4 ranks); `latest` names "
                         "ckpt-00000300.h5; skipped " +
                         (folder / "ckpt-00000300.h5").string() + ": checksum mismatch"));
}

TEST(ResumeTest, AutoSkipsCheckpointsOfAnotherLayout) {
  TempFolder folder;
  writeOne(folder.path(), sampleContent(100));
  CheckpointContent other = sampleContent(200);
  other.modelLayout = "another model\n";
  writeOne(folder.path(), other);
  const auto plan = findCheckpointToResume(folder.path(), kLayout);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->content.step, 100);
  EXPECT_THAT(plan->skipped, ElementsAre(HasSubstr("saved from another model layout: line 1")));
}

// A file copied in from another run under a higher-numbered name (step 50 inside, 999999 in its
// name) is passed over, so it never becomes this run's start; checkpointFiles names it as it is.
TEST(ResumeTest, AutoSkipsAFileWhoseStepIsNotItsName) {
  TempFolder folder;
  writeOne(folder.path(), sampleContent(250));
  TempFolder other;
  writeOne(other.path(), sampleContent(50));
  fs::copy_file(other / "ckpt-00000050.h5", folder / "ckpt-999999.h5");
  const auto plan = findCheckpointToResume(folder.path(), kLayout);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->path, folder / "ckpt-00000250.h5");
  EXPECT_THAT(plan->skipped, ElementsAre((folder / "ckpt-999999.h5").string() +
                                         ": its step inside is 50, not the 999999 of its name "
                                         "(another run's?)"));
  const std::vector<CheckpointFile> files = checkpointFiles(folder.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].step, 999999);
  EXPECT_EQ(files[0].path, folder / "ckpt-999999.h5");
}

// What the run refuses while taking a checkpoint (another optimiser, here) is passed over like a
// damaged file, and listed; named as a file, the same checkpoint is refused.
TEST(ResumeTest, AutoSkipsCheckpointsTheRunDoesNotTake) {
  TempFolder folder;
  CheckpointContent sgd = sampleContent(100);
  sgd.optimizerKind = "sgd";
  writeOne(folder.path(), sgd);
  writeOne(folder.path(), sampleContent(200));
  std::vector<std::int64_t> taken;
  const TakeCheckpoint takeSgdOnly = [&](const CheckpointContent& c, const fs::path& file) {
    if (c.optimizerKind != "sgd") throw CheckpointError(file.string() + ": not sgd");
    taken.push_back(c.step);
  };
  const auto plan = resolveResume("auto", folder.path(), kLayout, takeSgdOnly);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->path, folder / "ckpt-00000100.h5");
  EXPECT_THAT(taken, ElementsAre(100));
  EXPECT_THAT(plan->skipped, ElementsAre((folder / "ckpt-00000200.h5").string() + ": not sgd"));
  EXPECT_EQ(checkpointErrorOf([&] {
              resolveResume((folder / "ckpt-00000200.h5").string(), "unused", kLayout, takeSgdOnly);
            }),
            (folder / "ckpt-00000200.h5").string() + ": not sgd");
}

TEST(ResumeTest, NoUsableCheckpointIsAnErrorNotAFreshStart) {
  TempFolder folder;
  writeRaw(folder / "ckpt-00000100.h5", std::vector<std::uint8_t>(10, 0));
  writeRaw(folder / "ckpt-00000200.h5", std::vector<std::uint8_t>());
  EXPECT_EQ(checkpointErrorOf([&] { findCheckpointToResume(folder.path()); }),
            folder.path().string() + ": no usable checkpoint among 2: " +
                (folder / "ckpt-00000200.h5").string() + ": empty file (0 bytes); not a " +
                "checkpoint; " + (folder / "ckpt-00000100.h5").string() +
                ": not a ringtrain checkpoint (no ringtrain-ckpt header)");
}

TEST(ResumeTest, APathIsReadAsItIsAndAFolderIsSearched) {
  TempFolder folder;
  writeOne(folder.path(), sampleContent(100));
  writeOne(folder.path(), sampleContent(200));
  const auto byFile = resolveResume((folder / "ckpt-00000100.h5").string(), "unused");
  ASSERT_TRUE(byFile);
  EXPECT_EQ(byFile->content.step, 100);
  const auto byFolder = resolveResume(folder.path().string(), "unused");
  ASSERT_TRUE(byFolder);
  EXPECT_EQ(byFolder->content.step, 200);
  EXPECT_THAT(checkpointErrorOf([&] { resolveResume((folder / "x.h5").string(), "unused"); }),
              HasSubstr("x.h5: no such file"));
}

TEST(ResumeTest, ConfigChangesNameTheOptionsThatDiffer) {
  EXPECT_THAT(configChanges("batch-size = 64\nlr = 0.1\nseed = 1\n",
                            "batch-size = 32\nlr = 0.1\nranks = 4\n"),
              ElementsAre("batch-size: 64 -> 32", "seed: 1 -> (not set)", "ranks: (not set) -> 4"));
  EXPECT_THAT(configChanges("model mlp, batch 64/rank", "model mlp, batch 32/rank"),
              ElementsAre("removed: model mlp, batch 64/rank", "added: model mlp, batch 32/rank"));
  EXPECT_TRUE(configChanges("a = 1\n", "a = 1\n").empty());
}

// ---- A writer killed at every stage -------------------------------------------------------------

struct CrashCase {
  CrashPoint point;
  std::int64_t resumedStep;  // what auto resume must pick afterwards
  std::string latest;        // what `latest` must name afterwards
};

class CheckpointCrashTest : public ::testing::TestWithParam<CrashCase> {};

// The folder holds complete checkpoints 50 and 100 (latest: 100); their writer, with keep 2, is
// killed with SIGKILL at the stage under test of writing step 200 (pruning 50). Auto resume must
// then find a complete checkpoint -- the previous one until the new one is renamed into place, the
// new one after -- and the next run's first write must leave no temporary behind.
TEST_P(CheckpointCrashTest, LeavesAResumableFolder) {
  const CrashCase c = GetParam();
  TempFolder folder;
  CheckpointWriter writer(folder.path(), 2);
  writer.write(sampleContent(50));
  writer.write(sampleContent(100));

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    writer.write(sampleContent(200), c.point);
    _exit(0);  // the crash point was not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the writer was not killed at " << crashPointName(c.point);

  const auto plan = findCheckpointToResume(folder.path(), kLayout);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->content.step, c.resumedStep);
  EXPECT_TRUE(plan->skipped.empty());
  EXPECT_EQ(latestOf(folder.path()), c.latest);
  expectSame(plan->content, sampleContent(c.resumedStep));

  CheckpointWriter(folder.path(), 1).write(sampleContent(300));
  EXPECT_EQ(latestOf(folder.path()), "ckpt-00000300.h5\n");
  for (const std::string& name : folderNames(folder.path()))
    EXPECT_TRUE(name == "latest" || name.starts_with("ckpt-")) << name << " left behind";
}

INSTANTIATE_TEST_SUITE_P(
    EveryStage, CheckpointCrashTest,
    ::testing::Values(CrashCase{CrashPoint::kDuringTemporaryWrite, 100, "ckpt-00000100.h5\n"},
                      CrashCase{CrashPoint::kBeforeRename, 100, "ckpt-00000100.h5\n"},
                      CrashCase{CrashPoint::kBeforeLatest, 200, "ckpt-00000100.h5\n"},
                      CrashCase{CrashPoint::kBeforeLatestRename, 200, "ckpt-00000100.h5\n"},
                      CrashCase{CrashPoint::kBeforePrune, 200, "ckpt-00000200.h5\n"},
                      CrashCase{CrashPoint::kDuringPrune, 200, "ckpt-00000200.h5\n"}),
    [](const auto& p) {
      std::string name(crashPointName(p.param.point));
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST(CheckpointCrashTest, CrashPointsHaveNames) {
  EXPECT_EQ(crashPointFromName("before-rename"), CrashPoint::kBeforeRename);
  EXPECT_EQ(crashPointFromName(crashPointName(CrashPoint::kDuringPrune)), CrashPoint::kDuringPrune);
  EXPECT_FALSE(crashPointFromName("sometime"));
}

// ---- A real model and optimiser
// ------------------------------------------------------------------

// Adam's two state buffers, as Optimizer::state() hands them out (the trainer library, which
// builds optimisers, is left out of this test so that it builds whatever state the loop is in).
struct AdamState {
  std::vector<float> m, v;
  std::vector<std::span<float>> spans() { return {std::span<float>(m), std::span<float>(v)}; }
};

TEST(CheckpointModelTest, ParametersAndOptimizerStateGoBackWhereTheyCameFrom) {
  TempFolder folder;
  models::ModelSpec spec;
  spec.name = "mlp";
  spec.input = {1, 4, 4};
  spec.classes = 3;
  spec.hidden = {5};
  models::Model<float> model = models::makeModel<float>(spec);
  model.initialize(7);
  AdamState state{std::vector<float>(model.parameterCount()),
                  std::vector<float>(model.parameterCount())};
  for (std::size_t i = 0; i < state.m.size(); ++i) {
    state.m[i] = 0.001f * static_cast<float>(i);
    state.v[i] = 1.0f / static_cast<float>(i + 1);
  }

  CheckpointContent c;
  c.step = 1;
  c.modelLayout = model.describe();
  c.parameters = tensorsFromTable(model.parameterTable(), model.parameters());
  c.optimizerKind = "adam";
  c.optimizerSteps = 1;
  c.optimizerState = optimizerStateTensors("adam", state.spans());
  const auto path = writeOne(folder.path(), c).path;

  const CheckpointContent back = readCheckpoint(path, model.describe());
  EXPECT_THAT(back.parameters[0].name, "fc1.weight");
  models::Model<float> restored = models::makeModel<float>(spec);
  copyTensorsToFlat(back.parameters, restored.parameterTable(), restored.parameters(), path);
  EXPECT_EQ(std::memcmp(restored.parameters().data(), model.parameters().data(),
                        model.parameters().size_bytes()),
            0);
  AdamState fresh{std::vector<float>(model.parameterCount()),
                  std::vector<float>(model.parameterCount())};
  restoreOptimizerState(back, "adam", fresh.spans(), path);
  EXPECT_EQ(fresh.m, state.m);
  EXPECT_EQ(fresh.v, state.v);
  EXPECT_THAT(back.optimizerState[0].name, "exp_avg");
  EXPECT_THAT(back.optimizerState[1].name, "exp_avg_sq");

  // A model of another shape is refused by name and shape, another optimiser by kind.
  spec.hidden = {6};
  models::Model<float> other = models::makeModel<float>(spec);
  EXPECT_THAT(checkpointErrorOf([&] {
                copyTensorsToFlat(back.parameters, other.parameterTable(), other.parameters(),
                                  path);
              }),
              HasSubstr(": parameter fc1.weight is 5x16 but the model's is 6x16"));
  EXPECT_THAT(checkpointErrorOf([&] { restoreOptimizerState(back, "sgd", {}, path); }),
              HasSubstr(": optimiser state of adam but this run uses sgd"));
}

}  // namespace
}  // namespace ringtrain::storage
