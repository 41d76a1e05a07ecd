// TokenDataset: windows of context + 1 tokens at stride context, the batch contract (token ids as
// floats in, the next tokens as labels), exact data parallelism through the ShardedSampler, and
// loadDataFolder on a folder of token files.
#include "data/token_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/data_folder.h"
#include "data/idx_writer.h"
#include "data/sharded_sampler.h"
#include "data/token_file.h"
#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

using testing::dataErrorOf;
using testing::Gathered;
using testing::gatherAll;
using testing::TempFolder;

constexpr int kVocabulary = 50257;

// Token k is 1000 + k (below the vocabulary), so a gathered window shows where it started.
std::vector<std::uint16_t> countingTokens(std::int64_t count) {
  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(count));
  for (std::size_t k = 0; k < tokens.size(); ++k)
    tokens[k] = static_cast<std::uint16_t>(1000 + k);
  return tokens;
}

TEST(TokenDatasetTest, WindowsAtStrideContextWithNextTokenLabels) {
  // 11 tokens, context 3: windows start at tokens 0, 3, 6 (the last one ends at token 9).
  const TokenDataset dataset(countingTokens(11), 3, kVocabulary, "memory");
  EXPECT_EQ(dataset.size(), 3);
  EXPECT_EQ(dataset.sampleShape(), (SampleShape{1, 3, 1}));
  EXPECT_EQ(dataset.numClasses(), kVocabulary);
  EXPECT_EQ(dataset.labelsPerSample(), 3);
  const Gathered batch = gatherAll(dataset, {2, 0});
  EXPECT_EQ(batch.images, (std::vector<float>{1006, 1007, 1008, 1000, 1001, 1002}));
  EXPECT_EQ(batch.labels, (std::vector<std::int32_t>{1007, 1008, 1009, 1001, 1002, 1003}));
}

TEST(TokenDatasetTest, SizeIsTokensMinusOneOverContext) {
  EXPECT_EQ(TokenDataset(countingTokens(5), 4, kVocabulary, "m").size(), 1);
  EXPECT_EQ(TokenDataset(countingTokens(8), 4, kVocabulary, "m").size(), 1);
  EXPECT_EQ(TokenDataset(countingTokens(9), 4, kVocabulary, "m").size(), 2);
  EXPECT_EQ(TokenDataset(countingTokens(1001), 1, kVocabulary, "m").size(), 1000);
}

TEST(TokenDatasetTest, LargestIdsAreExactAsFloats) {
  const std::vector<std::uint16_t> tokens = {65535, 50256, 65534};
  const TokenDataset dataset(tokens, 2, 65536, "m");
  const Gathered batch = gatherAll(dataset, {0});
  EXPECT_EQ(batch.images, (std::vector<float>{65535.0f, 50256.0f}));
  EXPECT_EQ(static_cast<int>(batch.images[0]), 65535);
}

TEST(TokenDatasetTest, ReadEverySampleReadsEveryWindow) {
  const TokenDataset dataset(countingTokens(1000), 7, kVocabulary, "m");
  EXPECT_NO_THROW(readEverySample(dataset, 16));
}

TEST(TokenDatasetTest, IndexOutsideThrowsOutOfRange) {
  const TokenDataset dataset(countingTokens(11), 3, kVocabulary, "m");
  EXPECT_THROW(gatherAll(dataset, {3}), std::out_of_range);
  EXPECT_THROW(gatherAll(dataset, {-1}), std::out_of_range);
}

TEST(TokenDatasetTest, FileShorterThanOneWindowNamesIt) {
  TempFolder folder;
  writeTokenFile(folder / "short.bin", countingTokens(128));
  EXPECT_EQ(dataErrorOf([&] { TokenDataset(folder / "short.bin", 128, kVocabulary); }),
            (folder / "short.bin").string() +
                ": 128 tokens, shorter than one window of context 128 + 1 tokens");
  EXPECT_EQ(TokenDataset(folder / "short.bin", 127, kVocabulary).size(), 1);
}

TEST(TokenDatasetTest, FileErrorsComeThrough) {
  TempFolder folder;
  writeTokenFile(folder / "big.bin", std::vector<std::uint16_t>{1, 2, 3, 60000, 4});
  EXPECT_NE(dataErrorOf([&] { TokenDataset(folder / "big.bin", 2, kVocabulary); })
                .find("big.bin: token 60000 at position 3 is outside the vocabulary of 50257"),
            std::string::npos);
}

TEST(TokenDatasetTest, BadShapeIsCallerError) {
  EXPECT_THROW(TokenDataset(countingTokens(10), 0, kVocabulary, "m"), std::invalid_argument);
  EXPECT_THROW(TokenDataset(countingTokens(10), 2, 70000, "m"), std::invalid_argument);
}

TEST(TokenDatasetTest, DescribeSaysTokensWindowsAndVocabulary) {
  const TokenDataset dataset(countingTokens(11), 3, kVocabulary, "x.bin");
  EXPECT_EQ(dataset.describe(), "tokens x.bin: 11 tokens, 3 windows of 3 + 1, vocabulary 50257");
}

// The windows of a batch, one vector of inputs followed by labels per window, sorted: a batch as
// a set of samples.
std::vector<std::vector<std::int64_t>> windowsOf(const Dataset& dataset,
                                                 std::span<const std::int64_t> indices) {
  const Gathered batch = gatherAll(dataset, {indices.begin(), indices.end()});
  const auto context = static_cast<std::size_t>(dataset.labelsPerSample());
  std::vector<std::vector<std::int64_t>> windows;
  for (std::size_t j = 0; j < indices.size(); ++j) {
    std::vector<std::int64_t> window(batch.images.begin() + j * context,
                                     batch.images.begin() + (j + 1) * context);
    window.insert(window.end(), batch.labels.begin() + j * context,
                  batch.labels.begin() + (j + 1) * context);
    windows.push_back(std::move(window));
  }
  std::sort(windows.begin(), windows.end());
  return windows;
}

// R ranks with batch B read, at every step, exactly the windows one rank with batch R*B reads.
TEST(TokenDatasetTest, ShardedWindowsGiveExactDataParallelism) {
  constexpr std::int64_t kContext = 5;
  constexpr std::int64_t kBatch = 2;
  const TokenDataset dataset(countingTokens(24 * kContext + 3), kContext, kVocabulary, "m");
  ASSERT_EQ(dataset.size(), 24);
  for (const int ranks : {2, 3, 4}) {
    ShardedSampler single(SamplerOptions{dataset.size(), 0, 1, ranks * kBatch, false, true, 7});
    std::vector<ShardedSampler> shards;
    for (int r = 0; r < ranks; ++r)
      shards.emplace_back(SamplerOptions{dataset.size(), r, ranks, kBatch, false, true, 7});
    ASSERT_EQ(single.stepsPerEpoch(), shards[0].stepsPerEpoch());
    for (std::int64_t step = 0; step < 3 * single.stepsPerEpoch(); ++step) {
      std::vector<std::int64_t> together;
      for (auto& shard : shards) {
        const auto indices = shard.next();
        together.insert(together.end(), indices.begin(), indices.end());
      }
      const auto expected = windowsOf(dataset, single.next());
      ASSERT_EQ(windowsOf(dataset, together), expected) << ranks << " ranks, step " << step;
      ASSERT_EQ(expected.size(), static_cast<std::size_t>(ranks * kBatch));
    }
  }
}

TEST(TokenFolderTest, LoadsTrainAndValidationPairAsTokens) {
  TempFolder folder;
  writeTokenFile(folder / "fortunes_train.bin", countingTokens(41));
  writeTokenFile(folder / "fortunes_val.bin", countingTokens(9));
  EXPECT_STREQ(dataFolderFormat(folder.path()), "tokens");
  const DatasetPair pair = loadDataFolder(folder.path(), TokenOptions{4, kVocabulary});
  EXPECT_EQ(pair.train->size(), 10);
  EXPECT_EQ(pair.test->size(), 2);
  EXPECT_EQ(pair.train->labelsPerSample(), 4);
  EXPECT_NE(pair.test->describe().find("fortunes_val.bin"), std::string::npos);
}

TEST(TokenFolderTest, TokenFolderWithoutOptionsSaysWhatIsMissing) {
  TempFolder folder;
  writeTokenFile(folder / "train.bin", countingTokens(41));
  writeTokenFile(folder / "val.bin", countingTokens(41));
  EXPECT_EQ(dataErrorOf([&] { loadDataFolder(folder.path()); }),
            folder.path().string() +
                ": holds token files, which only a token model reads (one with a context length "
                "and a vocabulary)");
  EXPECT_NE(dataErrorOf([&] { loadDataFolder(folder.path(), TokenOptions{4, 0}); })
                .find("not context 4 and vocabulary 0"),
            std::string::npos);
}

TEST(TokenFolderTest, NeedsExactlyOneOfEach) {
  TempFolder folder;
  writeTokenFile(folder / "a_train.bin", countingTokens(41));
  writeTokenFile(folder / "b_train.bin", countingTokens(41));
  writeTokenFile(folder / "a_val.bin", countingTokens(41));
  EXPECT_NE(dataErrorOf([&] { loadDataFolder(folder.path(), TokenOptions{4, kVocabulary}); })
                .find("holds 2 files named *train.bin (a_train.bin, b_train.bin)"),
            std::string::npos);
  std::filesystem::remove(folder / "b_train.bin");
  std::filesystem::remove(folder / "a_val.bin");
  EXPECT_STREQ(dataFolderFormat(folder.path()), "tokens");
  EXPECT_NE(dataErrorOf([&] { loadDataFolder(folder.path(), TokenOptions{4, kVocabulary}); })
                .find("holds 0 files named *val.bin (none)"),
            std::string::npos);
}

TEST(TokenFolderTest, ImageFolderWithTokenOptionsIsRefused) {
  TempFolder folder;
  writeIdxLabels(folder / "train-labels-idx1-ubyte", std::vector<std::uint8_t>{1});
  EXPECT_STREQ(dataFolderFormat(folder.path()), "idx");
  EXPECT_EQ(dataErrorOf([&] { loadDataFolder(folder.path(), TokenOptions{4, kVocabulary}); }),
            folder.path().string() +
                ": holds no token files (*train.bin and *val.bin), but a token model (context 4, "
                "vocabulary 50257) is to read it");
  EXPECT_NE(dataErrorOf([&] { loadDataFolder(folder / "none", TokenOptions{4, kVocabulary}); })
                .find("none: no such folder"),
            std::string::npos);
}

}  // namespace
}  // namespace ringtrain::data
