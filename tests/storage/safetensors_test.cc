// safetensors files: the bytes as the specification lays them out (read back here with a JSON
// parser and memcpy, not with the library's reader), round trips, and one message naming the
// file for every way a file can break the specification.
#include "storage/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/formats/format_test_support.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
using formats::testing::TempFolder;
using formats::testing::writeRaw;
using ::testing::HasSubstr;

Tensor tensor(std::string name, std::vector<std::int64_t> shape, float first) {
  Tensor t{std::move(name), std::move(shape), {}};
  std::size_t count = 1;
  for (const auto d : t.shape)
    count *= static_cast<std::size_t>(d);
  for (std::size_t i = 0; i < count; ++i)
    t.values.push_back(first - 0.5f * static_cast<float>(i));
  return t;
}

SafetensorsContent sample() {
  SafetensorsContent c;
  c.tensors = {tensor("fc1.weight", {3, 2}, 1.5f), tensor("fc1.bias", {3}, -2.0f),
               tensor("scalar", {}, 7.0f), tensor("empty", {0, 4}, 0.0f)};
  c.metadata = {{"format", "pt"}, {"note", "two\nlines"}};
  return c;
}

// 8-byte little-endian length, then that much header, then the data.
std::vector<std::uint8_t> fileOf(const std::string& header, std::size_t dataBytes) {
  std::vector<std::uint8_t> bytes(8 + header.size() + dataBytes, 0);
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

std::string parseError(std::span<const std::uint8_t> bytes) {
  try {
    parseSafetensors(bytes, "w.safetensors");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Safetensors, BytesFollowTheSpecification) {
  const SafetensorsContent content = sample();
  const std::vector<std::uint8_t> bytes = encodeSafetensors(content);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = length << 8 | bytes[static_cast<std::size_t>(i)];
  EXPECT_EQ((8 + length) % 8, 0u) << "the data starts 8-byte aligned";
  const std::string text(bytes.begin() + 8,
                         bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  const nlohmann::json header = nlohmann::json::parse(text);
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["__metadata__"]["note"], "two\nlines");
  const std::size_t data = 8 + length;
  std::uint64_t expectedBegin = 0;
  for (const Tensor& t : content.tensors) {
    const nlohmann::json& info = header.at(t.name);
    EXPECT_EQ(info["dtype"], "F32");
    EXPECT_EQ(info["shape"].get<std::vector<std::int64_t>>(), t.shape);
    const auto offsets = info["data_offsets"].get<std::vector<std::uint64_t>>();
    ASSERT_EQ(offsets.size(), 2u);
    EXPECT_EQ(offsets[0], expectedBegin) << t.name << ": back to back, in the given order";
    EXPECT_EQ(offsets[1] - offsets[0], 4 * t.values.size());
    std::vector<float> values(t.values.size());
    std::memcpy(values.data(), bytes.data() + data + offsets[0], offsets[1] - offsets[0]);
    EXPECT_EQ(values, t.values) << t.name;
    expectedBegin = offsets[1];
  }
  EXPECT_EQ(data + expectedBegin, bytes.size()) << "no bytes after the last tensor";
  EXPECT_EQ(header.size(), content.tensors.size() + 1);
}

TEST(Safetensors, RoundTripThroughAFile) {
  const TempFolder folder;
  const fs::path path = folder.path() / "w.safetensors";
  writeRaw(path, std::vector<std::uint8_t>(3, 0));  // replaced
  SafetensorsContent content = sample();
  writeSafetensors(path, content);
  const SafetensorsContent back = readSafetensors(path);
  EXPECT_EQ(back.metadata, content.metadata);
  ASSERT_EQ(back.tensors.size(), content.tensors.size());
  for (std::size_t i = 0; i < back.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, content.tensors[i].name);
    EXPECT_EQ(back.tensors[i].shape, content.tensors[i].shape);
    EXPECT_EQ(back.tensors[i].values, content.tensors[i].values);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(folder.path()), fs::directory_iterator()), 1)
      << "no temporary left beside the file";
}

TEST(Safetensors, ReadsAHandWrittenFileInAnyOrderWithPadding) {
  // Offsets out of the header's order, header padded with spaces, no metadata.
  std::vector<std::uint8_t> bytes =
      fileOf(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("a":{"shape":[2],"data_offsets":[4,12],"dtype":"F32"}}   )",
             12);
  const float values[3] = {3.0f, -1.0f, 0.5f};
  std::memcpy(bytes.data() + bytes.size() - 12, values, 12);
  const SafetensorsContent content = parseSafetensors(bytes, "w.safetensors");
  ASSERT_EQ(content.tensors.size(), 2u);
  EXPECT_EQ(content.tensors[0].name, "b");
  EXPECT_EQ(content.tensors[0].values, std::vector<float>{3.0f});
  EXPECT_EQ(content.tensors[1].name, "a");
  EXPECT_EQ(content.tensors[1].values, (std::vector<float>{-1.0f, 0.5f}));
  EXPECT_TRUE(content.metadata.empty());
}

TEST(Safetensors, EncodeRefusesWhatCannotBeStored) {
  SafetensorsContent c;
  c.tensors = {tensor("a", {2}, 0), tensor("a", {1}, 0)};
  EXPECT_THROW(encodeSafetensors(c), std::invalid_argument);
  c.tensors = {tensor("__metadata__", {1}, 0)};
  EXPECT_THROW(encodeSafetensors(c), std::invalid_argument);
  c.tensors = {tensor("a", {2}, 0)};
  c.tensors[0].shape = {3};
  EXPECT_THROW(encodeSafetensors(c), std::invalid_argument);
}

TEST(Safetensors, EveryBrokenFileIsRefusedNamingIt) {
  const std::vector<std::uint8_t> good = encodeSafetensors(sample());
  const auto cut = [&](std::size_t n) {
    return std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
  };
  EXPECT_EQ(parseError(cut(5)),
            "w.safetensors: only 5 bytes: too short for a safetensors file (8-byte header length)");
  EXPECT_THAT(parseError(cut(40)), HasSubstr("w.safetensors: header length"));
  EXPECT_THAT(parseError(cut(40)), HasSubstr("does not fit in the file's 40 bytes"));
  EXPECT_THAT(parseError(cut(good.size() - 1)), HasSubstr("outside the"));
  std::vector<std::uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_EQ(parseError(longer),
            "w.safetensors: the tensors cover 40 bytes of data but the file has 41");

  const std::string f32 = R"("dtype":"F32","shape":[2],)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2]", "the header does not start with '{'"},
      {"{\"a\": ", "the header is not valid JSON (at byte 6 of 6)"},
      {"{\"a\" 1}", "the header is not valid JSON (at byte 5 of 7)"},
      {R"({"a":2e2222})", "the header holds a number too large for JSON's numbers"},
      {R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})",
       "tensor a is F16; ringtrain reads F32 tensors only"},
      {R"({"a":{"shape":[2],"data_offsets":[0,8]}})", "tensor a: no dtype"},
      {R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", "tensor a: no shape"},
      {"{\"a\":{" + f32 + R"("data_offsets":[0]}})", "tensor a: data_offsets is not [begin, end]"},
      {"{\"a\":{" + f32 + R"("data_offsets":[0,-8]}})", "tensor a: data_offsets is not"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
       "tensor a: shape [-2] is not sizes"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       "tensor a: shape [4294967296,4294967296] is larger than the file's data"},
      {"{\"a\":{" + f32 + R"("data_offsets":[0,16]}})",
       "tensor a: data_offsets [0,16] outside the 8 bytes of data"},
      {"{\"a\":{" + f32 + R"("data_offsets":[4,0]}})", "tensor a: data_offsets [4,0] outside"},
      {"{\"a\":{" + f32 + R"("data_offsets":[0,4]}})",
       "tensor a: data_offsets [0,4] hold 4 bytes but shape [2] of F32 needs 8"},
      {"{\"a\":{" + f32 + R"("data_offsets":[0,8]},"b":{)" + f32 + R"("data_offsets":[0,8]}})",
       "tensor b starts at byte 0 of the data, overlapping a (expected 8)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "tensor a starts at byte 4 of the data, leaving a gap (expected 0)"},
      {"{\"a\":{" + f32 + R"("data_offsets":[0,8]},"a":{)" + f32 + R"("data_offsets":[0,8]}})",
       "the header names a twice"},
      {R"({"__metadata__":{"x":1}})", "__metadata__ value of x is not a string"},
      {R"({"__metadata__":[]})", "__metadata__ is not a JSON object"},
      {R"({"a":3})", "tensor a: not a JSON object"},
  };
  for (const auto& [header, message] : cases) {
    EXPECT_EQ(parseError(fileOf(header, 8)).find("w.safetensors: " + message), 0u)
        << header << "\n  gave: " << parseError(fileOf(header, 8));
  }
}

// A header over the readers' limit is refused as such, though the file is long enough to hold it.
TEST(Safetensors, AHeaderOverTheLimitIsRefusedForThat) {
  std::vector<std::uint8_t> bytes(8 + 200, ' ');
  const std::uint64_t length = 100'000'001;
  std::memcpy(bytes.data(), &length, 8);
  EXPECT_EQ(parseError(bytes),
            "w.safetensors: header length 100000001 is over the 100000000-byte limit of "
            "safetensors readers (not safetensors, or damaged)");
  const TempFolder folder;
  const fs::path path = folder.path() / "long.safetensors";
  writeRaw(path, bytes);
  fs::resize_file(path, 8 + 2 * length);  // a hole: no disk used
  try {
    SafetensorsFile file(path);
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), HasSubstr("header length 100000001 is over the 100000000-byte limit"));
  }
}

TEST(Safetensors, ANanOrInfiniteValueIsRefusedNamingTheTensor) {
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    SafetensorsContent content = sample();
    content.tensors[1].values[2] = bad;
    const std::string what = std::isnan(bad) ? "NaN" : "an infinite value";
    EXPECT_EQ(parseError(encodeSafetensors(content)),
              "w.safetensors: tensor fc1.bias holds " + what +
                  " at index 2: weights must be finite numbers");
    const TempFolder folder;
    writeSafetensors(folder.path() / "w.safetensors", content);
    const SafetensorsFile file(folder.path() / "w.safetensors");
    std::vector<float> values(file.tensors()[0].count());
    file.read(file.tensors()[0], values);  // fc1.weight: fine
    values.resize(file.tensors()[1].count());
    EXPECT_THROW(file.read(file.tensors()[1], values), CheckpointError);
  }
}

// The header is read and checked without the data: the table of a file is there before any
// tensor is read.
TEST(Safetensors, TheTableComesFromTheHeaderAlone) {
  const TempFolder folder;
  writeSafetensors(folder.path() / "w.safetensors", sample());
  const SafetensorsFile file(folder.path() / "w.safetensors");
  ASSERT_EQ(file.tensors().size(), 4u);
  EXPECT_EQ(file.tensors()[0].name, "fc1.weight");
  EXPECT_EQ(file.tensors()[0].shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
}

TEST(Safetensors, NoRegularFileIsRefusedBeforeItIsOpened) {
  const TempFolder folder;
  const fs::path fifo = folder.path() / "w.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    readSafetensors(fifo);  // open() would wait for a writer forever
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()),
              fifo.string() + ": is a FIFO (named pipe), not a regular file");
  }
}

TEST(Safetensors, AnUnwritableFileIsNamedNotItsTemporary) {
  const TempFolder folder;
  const fs::path out = folder.path() / "missing" / "w.safetensors";
  try {
    writeSafetensors(out, sample());
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()).find(out.string() + ": "), 0u) << e.what();
  }
}

TEST(Safetensors, MissingFileIsNamed) {
  const TempFolder folder;
  try {
    readSafetensors(folder.path() / "none.safetensors");
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()),
              (folder.path() / "none.safetensors").string() + ": no such file");
  }
}

}  // namespace
}  // namespace ringtrain::storage
