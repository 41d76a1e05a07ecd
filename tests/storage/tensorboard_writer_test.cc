// TensorBoard logs, decoded without the writer's help: the TFRecord framing is parsed and every
// length and data CRC checked with the tests' own bitwise CRC-32C (event_file_reader.h); each
// record's bytes are then decoded by `protoc --decode_raw` (no schema at all) and by the generated
// Event class; the tags, steps and values must be the ones written. metrics.jsonl is parsed as
// JSON.
#include "storage/tensorboard_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tensorboard_event.pb.h"
#include "tests/formats/format_test_support.h"
#include "tests/storage/event_file_reader.h"

namespace ringtrain::storage {
namespace {

namespace fs = std::filesystem;
using formats::testing::readRaw;
using formats::testing::TempFolder;
using ::testing::ElementsAre;
using testing::floatBits;
using ::testing::HasSubstr;
using testing::readRecords;

// protoc's decoding of one record, through a scratch file in `folder`.
std::string decodeRaw(const std::vector<std::uint8_t>& record, const TempFolder& folder) {
  return testing::decodeRaw(record, folder / "record.bin", RINGTRAIN_PROTOC);
}

// The one event file of a folder.
fs::path eventFileIn(const fs::path& folder) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder))
    files.push_back(entry.path());
  EXPECT_EQ(files.size(), 1u) << folder;
  return files.empty() ? fs::path() : files[0];
}

TEST(TensorBoardWriterTest, EventFilesDecodeToTheScalarsWritten) {
  TempFolder folder;
  {
    TrainingLog log(folder / "logs");
    log.write("train", 0, {{"loss", 2.25}, {"learning_rate", 0.1}});
    log.write("train", 100, {{"loss", 0.5}, {"samples_per_second", 61655.0}});
    log.write("test", 100, {{"loss", 0.625}, {"accuracy", 0.9506}});
  }
  const fs::path trainFile = eventFileIn(folder / "logs/train");
  EXPECT_TRUE(std::regex_match(trainFile.filename().string(),
                               std::regex(R"(events\.out\.tfevents\.\d{10}\..+)")))
      << trainFile;

  const auto records = readRecords(trainFile);
  ASSERT_EQ(records.size(), 3u);
  // The first record: the file version, with a wall time and no step.
  const std::string first = decodeRaw(records[0], folder);
  EXPECT_THAT(first, HasSubstr("3: \"brain.Event:2\""));
  EXPECT_THAT(first, ::testing::ContainsRegex("1: 0x[0-9a-f]{16}"));  // wall_time, a double
  EXPECT_THAT(first, ::testing::Not(HasSubstr("\n2: ")));

  const std::string second = decodeRaw(records[2], folder);
  EXPECT_THAT(second, HasSubstr("\n2: 100\n"));
  EXPECT_THAT(second, HasSubstr("5 {\n  1 {\n    1: \"loss\"\n    2: " + floatBits(0.5f) +
                                "\n  }\n  1 {\n    1: \"samples_per_second\"\n    2: " +
                                floatBits(61655.0f) + "\n  }\n}"));

  // The generated class agrees, field by field.
  tensorboard::Event event;
  ASSERT_TRUE(event.ParseFromArray(records[1].data(), static_cast<int>(records[1].size())));
  EXPECT_EQ(event.step(), 0);
  ASSERT_EQ(event.summary().value_size(), 2);
  EXPECT_EQ(event.summary().value(0).tag(), "loss");
  EXPECT_EQ(event.summary().value(0).simple_value(), 2.25f);
  EXPECT_EQ(event.summary().value(1).tag(), "learning_rate");
  EXPECT_EQ(event.summary().value(1).simple_value(), 0.1f);
  EXPECT_GT(event.wall_time(), 1.6e9);

  const auto testRecords = readRecords(eventFileIn(folder / "logs/test"));
  ASSERT_EQ(testRecords.size(), 2u);
  const std::string test = decodeRaw(testRecords[1], folder);
  EXPECT_THAT(test, HasSubstr("1: \"accuracy\"\n    2: " + floatBits(0.9506f)));
}

TEST(TensorBoardWriterTest, MetricsFileHasOneJsonLinePerWrite) {
  TempFolder folder;
  {
    TrainingLog log(folder.path());
    log.write("train", 100, {{"loss", 0.5}, {"allreduce_ms", 0.33}});
    log.write("test", 100, {{"accuracy", 0.95}});
  }
  std::ifstream in(folder / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["split"], "train");
  EXPECT_EQ(lines[0]["step"], 100);
  EXPECT_EQ(lines[0]["loss"], 0.5);
  EXPECT_EQ(lines[0]["allreduce_ms"], 0.33);
  EXPECT_GT(lines[0]["wall_time"].get<double>(), 1.6e9);
  EXPECT_EQ(lines[1]["split"], "test");
  EXPECT_EQ(lines[1]["accuracy"], 0.95);
}

TEST(TensorBoardWriterTest, AResumeIsMarkedForTensorBoardAndScripts) {
  TempFolder folder;
  {
    TrainingLog log(folder.path());
    log.write("train", 300, {{"loss", 0.5}});
  }
  {
    TrainingLog log(folder.path());
    log.markResumed(200);
    log.write("train", 200, {{"loss", 0.75}});
  }
  // The resumed run's file: version, then SessionLog START at step 200, then the scalars.
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder / "train"))
    files.push_back(entry.path());
  ASSERT_EQ(files.size(), 2u) << "a second writer within the same second needs its own file";
  std::sort(files.begin(), files.end());
  const auto records = readRecords(files[1]);
  ASSERT_EQ(records.size(), 3u);
  const std::string start = decodeRaw(records[1], folder);
  EXPECT_THAT(start, HasSubstr("\n2: 200\n7 {\n  1: 1\n}"));
  std::ifstream in(folder / "metrics.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[1], HasSubstr("\"resumed_at_step\":200"));
}

TEST(TensorBoardWriterTest, ASplitMustBeAFolderName) {
  TempFolder folder;
  TrainingLog log(folder.path());
  EXPECT_THROW(log.write("../x", 1, {{"loss", 1.0}}), std::invalid_argument);
  EXPECT_THROW(log.write("", 1, {{"loss", 1.0}}), std::invalid_argument);
}

TEST(TensorBoardWriterTest, AFolderThatCannotBeCreatedIsOneLine) {
  TempFolder folder;
  formats::testing::writeRaw(folder / "file", std::vector<std::uint8_t>{1});
  try {
    TrainingLog log(folder / "file/logs");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith((folder / "file/logs").string() +
                                                ": cannot create the folder"));
  }
}

}  // namespace
}  // namespace ringtrain::storage
