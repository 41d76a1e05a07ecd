// Token files in llm.c's format: the exact bytes the writer produces, round trips, and one line
// naming the file for every way a file can be wrong.
#include "data/token_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

using testing::dataErrorOf;
using testing::TempFolder;
using testing::writeRaw;

constexpr int kVocabulary = 50257;

// A header with these three fields (the rest zero) and the given payload bytes after it.
std::vector<std::uint8_t> rawFile(std::int32_t magic, std::int32_t version, std::int32_t count,
                                  const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> bytes(kTokenFileHeaderBytes + payload.size(), 0);
  const std::int32_t fields[3] = {magic, version, count};
  for (int f = 0; f < 3; ++f) {
    for (int k = 0; k < 4; ++k)
      bytes[f * 4 + k] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(fields[f]) >> 8 * k);
  }
  std::copy(payload.begin(), payload.end(), bytes.begin() + kTokenFileHeaderBytes);
  return bytes;
}

std::string readError(const std::filesystem::path& path, int vocabulary = kVocabulary) {
  return dataErrorOf([&] { readTokenFile(path, vocabulary); });
}

TEST(TokenFileTest, WriterProducesLlmcHeaderAndLittleEndianTokens) {
  const std::vector<std::uint16_t> tokens = {0x1234, 50256, 7};
  const auto bytes = encodeTokenFile(tokens);
  EXPECT_EQ(bytes, rawFile(20240520, 1, 3, {0x34, 0x12, 0x50, 0xc4, 0x07, 0x00}));
}

TEST(TokenFileTest, RoundTripThroughDurableWriter) {
  TempFolder folder;
  std::vector<std::uint16_t> tokens;
  for (int i = 0; i < 1000; ++i)
    tokens.push_back(static_cast<std::uint16_t>((i * 7919) % kVocabulary));
  writeTokenFile(folder / "t.bin", tokens);
  EXPECT_EQ(readTokenFile(folder / "t.bin", kVocabulary), tokens);
  // Replacing a file works and leaves no temporary file beside it.
  writeTokenFile(folder / "t.bin", std::vector<std::uint16_t>{1, 2});
  EXPECT_EQ(readTokenFile(folder / "t.bin", kVocabulary), (std::vector<std::uint16_t>{1, 2}));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(folder.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(TokenFileTest, EmptyFileOfZeroTokensIsValid) {
  TempFolder folder;
  writeTokenFile(folder / "empty.bin", {});
  EXPECT_TRUE(readTokenFile(folder / "empty.bin", kVocabulary).empty());
}

TEST(TokenFileTest, WrongMagicNamesFileAndValue) {
  TempFolder folder;
  writeRaw(folder / "m.bin", rawFile(20240521, 1, 0, {}));
  const std::string message = readError(folder / "m.bin");
  EXPECT_NE(message.find((folder / "m.bin").string() + ": wrong magic 20240521, expected 20240520"),
            std::string::npos)
      << message;
}

TEST(TokenFileTest, UnsupportedVersion) {
  TempFolder folder;
  writeRaw(folder / "v.bin", rawFile(20240520, 2, 0, {}));
  EXPECT_NE(readError(folder / "v.bin").find("v.bin: unsupported version 2"), std::string::npos);
}

TEST(TokenFileTest, TruncatedHeader) {
  TempFolder folder;
  auto bytes = rawFile(20240520, 1, 0, {});
  bytes.resize(100);
  writeRaw(folder / "h.bin", bytes);
  EXPECT_NE(readError(folder / "h.bin").find("h.bin: truncated: 100 bytes, shorter than the 1024"),
            std::string::npos);
}

TEST(TokenFileTest, FewerTokensThanHeaderSays) {
  TempFolder folder;
  writeRaw(folder / "t.bin", rawFile(20240520, 1, 3, {1, 0, 2, 0, 3}));
  EXPECT_NE(readError(folder / "t.bin")
                .find("t.bin: truncated: the header counts 3 tokens (1030 bytes with the header) "
                      "but the file has 1029 bytes"),
            std::string::npos);
}

TEST(TokenFileTest, TrailingBytes) {
  TempFolder folder;
  writeRaw(folder / "x.bin", rawFile(20240520, 1, 1, {1, 0, 9}));
  EXPECT_NE(readError(folder / "x.bin").find("x.bin: trailing bytes after the 1 tokens"),
            std::string::npos);
}

TEST(TokenFileTest, NegativeCount) {
  TempFolder folder;
  writeRaw(folder / "n.bin", rawFile(20240520, 1, -5, {}));
  EXPECT_NE(readError(folder / "n.bin").find("negative token count -5"), std::string::npos);
}

TEST(TokenFileTest, TokenOutsideVocabularyNamesPositionAndId) {
  TempFolder folder;
  writeTokenFile(folder / "o.bin", std::vector<std::uint16_t>{5, 99, 100, 7});
  EXPECT_EQ(readTokenFile(folder / "o.bin", 101).size(), 4u);
  EXPECT_EQ(readError(folder / "o.bin", 100),
            (folder / "o.bin").string() +
                ": token 100 at position 2 is outside the vocabulary of 100");
}

TEST(TokenFileTest, MissingFileNamesIt) {
  TempFolder folder;
  EXPECT_NE(readError(folder / "none.bin").find("none.bin: no such file"), std::string::npos);
}

TEST(TokenFileTest, VocabularyBeyondUint16IsCallerError) {
  TempFolder folder;
  writeTokenFile(folder / "t.bin", std::vector<std::uint16_t>{1});
  EXPECT_THROW(readTokenFile(folder / "t.bin", 65537), std::invalid_argument);
  EXPECT_THROW(readTokenFile(folder / "t.bin", 0), std::invalid_argument);
}

TEST(TokenFileTest, DecodesBytesInMemoryWithTheSameChecks) {
  const std::vector<std::uint16_t> tokens = {3, 1, 4, 1, 5};
  EXPECT_EQ(decodeTokenFile(encodeTokenFile(tokens), kVocabulary, "memory"), tokens);
  EXPECT_EQ(dataErrorOf([&] { decodeTokenFile(encodeTokenFile(tokens), 5, "memory"); }),
            "memory: token 5 at position 4 is outside the vocabulary of 5");
  const std::vector<std::uint8_t> three = {1, 2, 3};
  EXPECT_EQ(dataErrorOf([&] { decodeTokenFile(three, kVocabulary, "memory"); }),
            "memory: truncated: 3 bytes, shorter than the 1024-byte header");
}

TEST(TokenFileTest, StatisticsGiveUnigramEntropyInNats) {
  // Four distinct ids, equally often: ln 4. One id always: 0.
  const auto uniform = tokenStatistics(std::vector<std::uint16_t>{1, 2, 3, 50256, 2, 1, 50256, 3});
  EXPECT_EQ(uniform.count, 8);
  EXPECT_EQ(uniform.distinct, 4);
  EXPECT_NEAR(uniform.unigramEntropyNats, std::log(4.0), 1e-12);
  EXPECT_EQ(tokenStatistics(std::vector<std::uint16_t>{7, 7, 7}).unigramEntropyNats, 0.0);
  // p = (1/2, 1/4, 1/4): 1.5 ln 2.
  EXPECT_NEAR(tokenStatistics(std::vector<std::uint16_t>{0, 0, 65535, 9}).unigramEntropyNats,
              1.5 * std::log(2.0), 1e-12);
  EXPECT_EQ(tokenStatistics({}).distinct, 0);
}

}  // namespace
}  // namespace ringtrain::data
