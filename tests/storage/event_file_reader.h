// TensorBoard event files read back without the writer's help, for tests: the TFRecord framing
// is parsed here and every length and data CRC checked with the tests' own bitwise CRC-32C
// (tests/formats/format_test_support.h); a record's bytes are decoded by `protoc --decode_raw`,
// which needs no schema at all.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "tests/formats/format_test_support.h"

namespace ringtrain::storage::testing {

inline std::uint64_t littleEndianAt(const std::vector<std::uint8_t>& bytes, std::size_t at,
                                    int count) {
  std::uint64_t value = 0;
  for (int i = 0; i < count; ++i)
    value |= std::uint64_t{bytes[at + static_cast<std::size_t>(i)]} << (8 * i);
  return value;
}

// Every record's data, after checking its framing: length, masked CRC of the length, data,
// masked CRC of the data, and nothing after the last record.
inline std::vector<std::vector<std::uint8_t>> readRecords(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = formats::testing::readRaw(path);
  std::vector<std::vector<std::uint8_t>> records;
  std::size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_GE(bytes.size() - at, 12u) << "a record header is cut short at " << at;
    if (bytes.size() - at < 12) break;
    const std::uint64_t length = littleEndianAt(bytes, at, 8);
    EXPECT_EQ(littleEndianAt(bytes, at + 8, 4),
              formats::testing::referenceMaskedCrc32c(std::span(&bytes[at], 8)))
        << "length CRC of the record at " << at;
    EXPECT_LE(at + 12 + length + 4, bytes.size()) << "a record's data is cut short at " << at;
    if (at + 12 + length + 4 > bytes.size()) break;
    const std::span<const std::uint8_t> data(&bytes[at + 12], length);
    EXPECT_EQ(littleEndianAt(bytes, at + 12 + length, 4),
              formats::testing::referenceMaskedCrc32c(data))
        << "data CRC of the record at " << at;
    records.emplace_back(data.begin(), data.end());
    at += 12 + length + 4;
  }
  return records;
}

// protoc's schema-less decoding of one record's bytes; `scratch` is a file name to use.
inline std::string decodeRaw(const std::vector<std::uint8_t>& record,
                             const std::filesystem::path& scratch, const std::string& protoc) {
  formats::testing::writeRaw(scratch, record);
  const std::string command = protoc + " --decode_raw < " + scratch.string();
  std::FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (!pipe) return {};
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    text.append(buffer, n);
  EXPECT_EQ(pclose(pipe), 0) << "protoc --decode_raw failed on a record: " << text;
  return text;
}

// How protoc --decode_raw prints a float (a fixed32): "0x3f000000".
inline std::string floatBits(float value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", std::bit_cast<std::uint32_t>(value));
  return text;
}

}  // namespace ringtrain::storage::testing
