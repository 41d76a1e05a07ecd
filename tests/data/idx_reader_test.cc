// The IDX reader: round trips through plain and .gz files, and one exact one-line message for
// every way a file can be wrong.
#include "data/idx_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "data/idx_writer.h"
#include "formats/file_bytes.h"
#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

using formats::isGzipPath;
using formats::kMaxDeflateExpansion;
using formats::writeFileAtomically;
using testing::dataErrorOf;
using testing::TempFolder;
using testing::writeRaw;

std::vector<std::uint8_t> patternPixels(std::size_t n) {
  std::vector<std::uint8_t> pixels(n);
  for (std::size_t i = 0; i < n; ++i)
    pixels[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
  return pixels;
}

class IdxRoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IdxRoundTripTest, ImagesAndLabelsComeBackUnchanged) {
  TempFolder folder;
  const std::string suffix = GetParam();
  const auto pixels = patternPixels(5 * 3 * 4);
  const std::vector<std::uint8_t> labels = {0, 9, 3, 3, 7};
  writeIdxImages(folder / ("images" + suffix), 5, 3, 4, pixels);
  writeIdxLabels(folder / ("labels" + suffix), labels);

  const IdxImages images = readIdxImages(folder / ("images" + suffix));
  EXPECT_EQ(images.count, 5);
  EXPECT_EQ(images.rows, 3);
  EXPECT_EQ(images.columns, 4);
  EXPECT_EQ(images.pixels, pixels);
  EXPECT_EQ(readIdxLabels(folder / ("labels" + suffix), 10), labels);
  // Only the .gz file is compressed: its first bytes are gzip's magic, not IDX's.
  const auto raw = testing::readRaw(folder / ("images" + suffix));
  EXPECT_EQ(raw[0] == 0x1f && raw[1] == 0x8b, suffix == ".gz");
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, IdxRoundTripTest, ::testing::Values("", ".gz"),
                         [](const auto& p) { return p.param.empty() ? "Plain" : "Gzip"; });

// Appends the gzip member of `content` (written by our writer) to the file.
void appendGzipMember(const std::filesystem::path& path, const std::vector<std::uint8_t>& content) {
  const auto member = path.parent_path() / "member.gz";
  writeFileAtomically(member, content);
  auto bytes = testing::readRaw(path);
  const auto more = testing::readRaw(member);
  bytes.insert(bytes.end(), more.begin(), more.end());
  writeRaw(path, bytes);
}

TEST(IdxReaderTest, ReadsConcatenatedGzipMembersAsOneFile) {
  TempFolder folder;
  const auto bytes = encodeIdxLabels(std::vector<std::uint8_t>{1, 2, 3, 4});
  const std::span<const std::uint8_t> all(bytes);
  writeFileAtomically(folder / "labels.gz", all.first(5));
  appendGzipMember(folder / "labels.gz", {all.begin() + 5, all.end()});
  EXPECT_EQ(readIdxLabels(folder / "labels.gz", 10), (std::vector<std::uint8_t>{1, 2, 3, 4}));
}

TEST(IdxReaderTest, LargeGzipFileInflatesCompletely) {
  // Two million labels compress to a few kilobytes: the output buffer must grow many times.
  TempFolder folder;
  std::vector<std::uint8_t> labels(2'000'000, 3);
  labels.back() = 9;
  writeIdxLabels(folder / "labels.gz", labels);
  EXPECT_LT(std::filesystem::file_size(folder / "labels.gz"), 100'000u);
  EXPECT_EQ(readIdxLabels(folder / "labels.gz", 10), labels);
}

// Each case writes a file and expects readIdxImages or readIdxLabels to fail with this message
// after "<path>: ".
struct Corruption {
  std::string name;
  std::string file;  // a name ending in .gz is compressed
  bool labels;       // read as labels (10 classes) rather than images
  std::function<std::vector<std::uint8_t>()> bytes;
  std::string message;
};

std::vector<std::uint8_t> images2x3x4() {
  return encodeIdxImages(2, 3, 4, patternPixels(24));
}

std::vector<std::uint8_t> withHeader(std::vector<std::uint8_t> bytes, std::size_t offset,
                                     std::uint32_t value) {
  for (int k = 0; k < 4; ++k)
    bytes[offset + k] = static_cast<std::uint8_t>(value >> (24 - 8 * k));
  return bytes;
}

std::vector<std::uint8_t> resized(std::vector<std::uint8_t> bytes, std::size_t size) {
  bytes.resize(size, 0xee);
  return bytes;
}

std::vector<Corruption> corruptions() {
  return {
      {"EmptyFile", "f", false, [] { return std::vector<std::uint8_t>{}; },
       "empty file (0 bytes); expected IDX images (magic number 0x00000803)"},
      {"EmptyOnceUncompressed", "f.gz", true, [] { return std::vector<std::uint8_t>{}; },
       "empty once uncompressed (0 bytes); expected IDX labels (magic number 0x00000801)"},
      {"ShorterThanTheMagicNumber", "f", false,
       [] {
         return std::vector<std::uint8_t>{0, 0};
       },
       "truncated header: the file has 2 bytes but an IDX images header has 16 bytes"},
      {"TruncatedHeader", "f", false, [] { return resized(images2x3x4(), 10); },
       "truncated header: the file has 10 bytes but an IDX images header has 16 bytes"},
      {"TruncatedHeaderGzip", "f.gz", true, [] { return resized(encodeIdxLabels({}), 6); },
       "truncated header: the file has 6 bytes uncompressed but an IDX labels header has 8 bytes"},
      {"TruncatedData", "f", false, [] { return resized(images2x3x4(), 30); },
       "truncated: header says 2 images of 3x4 (40 bytes) but the file has 30 bytes"},
      {"TruncatedMnistSizedData", "f", false,
       [] {
         return resized(withHeader(encodeIdxImages(1, 28, 28, patternPixels(784)), 4, 60000), 1000);
       },
       "truncated: header says 60000 images of 28x28 (47040016 bytes) but the file has 1000 "
       "bytes"},
      {"TruncatedDataGzip", "f.gz", false, [] { return resized(images2x3x4(), 30); },
       "truncated: header says 2 images of 3x4 (40 bytes) but the file has 30 bytes "
       "uncompressed"},
      {"TrailingBytes", "f", false, [] { return resized(images2x3x4(), 43); },
       "trailing bytes: header says 2 images of 3x4 (40 bytes) but the file has 43 bytes"},
      {"TrailingLabel", "f", true,
       [] {
         return resized(encodeIdxLabels(std::vector<std::uint8_t>{1, 2}), 11);
       },
       "trailing bytes: header says 2 labels (10 bytes) but the file has 11 bytes"},
      {"WrongMagic", "f", false, [] { return withHeader(images2x3x4(), 0, 0x12345678); },
       "not an IDX file: magic number 0x12345678 (expected 0x00000803 for images)"},
      {"Float32Type", "f", false, [] { return withHeader(images2x3x4(), 0, 0x00000d03); },
       "unsupported IDX element type: magic number 0x00000d03 has type code 0x0d (float32); only "
       "0x08 (unsigned byte) is read"},
      {"LabelsReadAsImages", "f", false,
       [] {
         return encodeIdxLabels(std::vector<std::uint8_t>{1, 2});
       },
       "wrong number of dimensions: magic number 0x00000801 says 1 but IDX images have 3 (a "
       "labels file?)"},
      {"ImagesReadAsLabels", "f", true, [] { return images2x3x4(); },
       "wrong number of dimensions: magic number 0x00000803 says 3 but IDX labels have 1 (an "
       "images file?)"},
      {"ZeroRows", "f", false, [] { return resized(withHeader(images2x3x4(), 8, 0), 16); },
       "header says 2 images of 0x4; every size must be positive"},
      {"SizesWhoseProductOverflows", "f", false,
       [] {
         auto b = resized(images2x3x4(), 16);
         for (std::size_t offset : {4, 8, 12})
           b = withHeader(b, offset, 0xffffffff);
         return b;
       },
       "truncated: header says 4294967295 images of 4294967295x4294967295 (more than 2^64 bytes) "
       "but the file has 16 bytes"},
      {"LabelOutOfRange", "f", true,
       [] {
         return encodeIdxLabels(std::vector<std::uint8_t>{1, 10, 3});
       },
       "label 10 at index 1 is out of range: 10 classes take labels 0 to 9"},
      {"GzipDataUnderAPlainName", "f", false,
       [] { return std::vector<std::uint8_t>{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}; },
       "gzip-compressed data in a file whose name does not end in .gz"},
  };
}

class IdxCorruptionTest : public ::testing::TestWithParam<Corruption> {};

TEST_P(IdxCorruptionTest, FailsWithOneLineNamingTheFileAndTheProblem) {
  const Corruption& c = GetParam();
  TempFolder folder;
  const auto path = folder / c.file;
  if (isGzipPath(path)) {
    writeFileAtomically(path, c.bytes());
  } else {
    writeRaw(path, c.bytes());
  }
  const std::string message = dataErrorOf([&] {
    if (c.labels) {
      readIdxLabels(path, 10);
    } else {
      readIdxImages(path);
    }
  });
  EXPECT_EQ(message, path.string() + ": " + c.message);
}

INSTANTIATE_TEST_SUITE_P(AllCases, IdxCorruptionTest, ::testing::ValuesIn(corruptions()),
                         [](const auto& p) { return p.param.name; });

// Damage to the compressed stream itself.
class GzipDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    writeFileAtomically(path_, images2x3x4());
    gz_ = testing::readRaw(path_);
  }
  std::string readError(const std::vector<std::uint8_t>& bytes) {
    writeRaw(path_, bytes);
    return dataErrorOf([&] { readIdxImages(path_); });
  }
  TempFolder folder_;
  std::filesystem::path path_ = folder_ / "images.gz";
  std::vector<std::uint8_t> gz_;
};

TEST_F(GzipDamageTest, TruncatedCompressedStream) {
  const auto cut = std::vector<std::uint8_t>(gz_.begin(), gz_.end() - 12);
  EXPECT_EQ(readError(cut), path_.string() +
                                ": truncated gzip data: the compressed stream ends "
                                "early (" +
                                std::to_string(cut.size()) + " bytes)");
}

TEST_F(GzipDamageTest, GarbageAfterTheCompressedStream) {
  auto bytes = gz_;
  bytes.insert(bytes.end(), {'x', 'y', 'z'});
  EXPECT_EQ(readError(bytes), path_.string() + ": 3 trailing bytes after the gzip data");
}

TEST_F(GzipDamageTest, CorruptCompressedData) {
  auto bytes = gz_;
  bytes[12] ^= 0xff;  // inside the deflate data, after the 10-byte gzip header
  bytes[13] ^= 0xff;
  const std::string message = readError(bytes);
  EXPECT_EQ(message.rfind(path_.string() + ": corrupt gzip data (", 0), 0u) << message;
}

TEST_F(GzipDamageTest, PlainDataUnderAGzipName) {
  EXPECT_EQ(readError(images2x3x4()),
            path_.string() + ": not gzip data, although the name ends in .gz");
}

// A .gz file of C bytes inflates to at most kMaxDeflateExpansion * C bytes. A header that claims
// more is refused before anything past it is inflated, and a stream that inflates past what the
// header claims (a "gzip bomb") is inflated one byte past the claim and no further.
class IdxGzipSizeTest : public ::testing::Test {
 protected:
  // Writes `content` gzip-compressed (zlib, through the writer); returns the file's size.
  std::uint64_t writeGzip(const std::vector<std::uint8_t>& content) {
    writeFileAtomically(path_, content);
    return std::filesystem::file_size(path_);
  }
  std::string imagesError() {
    return dataErrorOf([&] { readIdxImages(path_); });
  }
  std::string labelsError() {
    return dataErrorOf([&] { readIdxLabels(path_, 10); });
  }
  // Labels 1, 2, 3 under a header that claims `total` bytes (8 of header, total - 8 labels).
  static std::vector<std::uint8_t> labelsClaiming(std::uint64_t total) {
    return withHeader(encodeIdxLabels(std::vector<std::uint8_t>{1, 2, 3}), 4,
                      static_cast<std::uint32_t>(total - 8));
  }
  TempFolder folder_;
  std::filesystem::path path_ = folder_ / "idx.gz";
};

TEST_F(IdxGzipSizeTest, AClaimBeyondDeflatesLargestExpansionIsRefused) {
  // 60000 MNIST-sized images announced, one present: a few hundred compressed bytes.
  const std::uint64_t c =
      writeGzip(withHeader(encodeIdxImages(1, 28, 28, patternPixels(784)), 4, 60000));
  ASSERT_LT(c * kMaxDeflateExpansion, 47040016u);
  EXPECT_EQ(imagesError(), path_.string() +
                               ": header says 60000 images of 28x28 (47040016 bytes) but a gzip "
                               "file of " +
                               std::to_string(c) + " bytes can hold at most " +
                               std::to_string(1032 * c) +
                               " bytes (deflate expands at most 1032 times)");
}

TEST_F(IdxGzipSizeTest, TheBoundIsExactlyDeflatesLargestExpansion) {
  const std::uint64_t c = writeGzip(labelsClaiming(100'000));
  // A claim of exactly 1032 x C bytes is possible: the file is merely short.
  ASSERT_EQ(writeGzip(labelsClaiming(1032 * c)), c) << "the header changed the compressed size";
  EXPECT_EQ(labelsError(), path_.string() + ": truncated: header says " +
                               std::to_string(1032 * c - 8) + " labels (" +
                               std::to_string(1032 * c) +
                               " bytes) but the file has 11 bytes uncompressed");
  // One byte more is not.
  ASSERT_EQ(writeGzip(labelsClaiming(1032 * c + 1)), c) << "the header changed the compressed size";
  EXPECT_EQ(labelsError(), path_.string() + ": header says " + std::to_string(1032 * c - 7) +
                               " labels (" + std::to_string(1032 * c + 1) +
                               " bytes) but a gzip file of " + std::to_string(c) +
                               " bytes can hold at most " + std::to_string(1032 * c) +
                               " bytes (deflate expands at most 1032 times)");
}

TEST_F(IdxGzipSizeTest, ShortContentWithinTheBoundIsTruncated) {
  // 1000 images announced, 10 present, of random (incompressible) pixels: the claim fits the
  // compressed size, the content does not.
  std::mt19937 random(7);
  std::vector<std::uint8_t> pixels(10 * 784);
  for (auto& p : pixels)
    p = static_cast<std::uint8_t>(random());
  const std::uint64_t c = writeGzip(withHeader(encodeIdxImages(10, 28, 28, pixels), 4, 1000));
  ASSERT_GT(c * kMaxDeflateExpansion, 784016u);
  EXPECT_EQ(imagesError(), path_.string() +
                               ": truncated: header says 1000 images of 28x28 (784016 bytes) but "
                               "the file has 7856 bytes uncompressed");
}

TEST_F(IdxGzipSizeTest, InflatingStopsOneBytePastTheClaim) {
  // One image announced, then 16 MiB of zeros: about 16 KiB compressed, well within the bound.
  // The message says "more than 800 bytes": the rest was never inflated.
  auto content = encodeIdxImages(1, 28, 28, patternPixels(784));
  content.resize(content.size() + (std::size_t{16} << 20), 0);
  writeGzip(content);
  EXPECT_EQ(imagesError(), path_.string() +
                               ": trailing bytes: header says 1 images of 28x28 (800 bytes) but "
                               "the file has more than 800 bytes uncompressed");
}

TEST_F(IdxGzipSizeTest, AFurtherMemberWithContentIsTrailingContent) {
  writeGzip(encodeIdxLabels(std::vector<std::uint8_t>{1, 2, 3}));
  appendGzipMember(path_, {4});
  EXPECT_EQ(labelsError(), path_.string() +
                               ": trailing bytes: header says 3 labels (11 bytes) but the file "
                               "has more than 11 bytes uncompressed");
}

TEST_F(IdxGzipSizeTest, AFurtherEmptyMemberIsReadToTheEnd) {
  // The content is complete after the first member; the reader still checks the rest of the
  // stream (gzip -d accepts an empty member, and so do we) ...
  writeGzip(encodeIdxLabels(std::vector<std::uint8_t>{1, 2, 3}));
  appendGzipMember(path_, {});
  EXPECT_EQ(readIdxLabels(path_, 10), (std::vector<std::uint8_t>{1, 2, 3}));
  // ... and bytes after it.
  auto bytes = testing::readRaw(path_);
  bytes.push_back('x');
  writeRaw(path_, bytes);
  EXPECT_EQ(labelsError(), path_.string() + ": 1 trailing bytes after the gzip data");
}

TEST(IdxReaderTest, EmptyGzipFile) {
  TempFolder folder;
  writeRaw(folder / "labels.gz", {});
  EXPECT_EQ(dataErrorOf([&] { readIdxLabels(folder / "labels.gz", 10); }),
            (folder / "labels.gz").string() +
                ": empty file (0 bytes); expected IDX labels (magic number 0x00000801)");
}

TEST(IdxReaderTest, MissingFileAndFolderAreNamed) {
  TempFolder folder;
  EXPECT_EQ(dataErrorOf([&] { readIdxImages(folder / "nope"); }),
            (folder / "nope").string() + ": no such file");
  EXPECT_EQ(dataErrorOf([&] { readIdxImages(folder.path()); }),
            folder.path().string() + ": is a folder, not a file");
}

}  // namespace
}  // namespace ringtrain::data
