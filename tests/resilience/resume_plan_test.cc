// planResume: how a checkpoint continues on this run's rank count -- the batch per rank, the
// learning rate and the position in the epoch -- and the refusals, each one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "data/random.h"
#include "training/training_checkpoint.h"

namespace ringtrain::training {
namespace {

using ::testing::HasSubstr;

// A checkpoint of 2 ranks x batch 8 (global 16), taken at step 25 of epoch 1 (of 30 steps: 960
// samples / 2 ranks / 8), with --lr 0.1 and the schedule's base rate 0.1.
storage::CheckpointContent savedByTwoRanks() {
  storage::CheckpointContent saved;
  saved.step = 55;
  saved.epoch = 1;
  saved.sampler = {1, 25};
  saved.seed = 42;
  saved.rngState = {data::hash64(42, 1)};
  saved.worldSize = 2;
  saved.batchSize = 8;
  saved.optimizerKind = "sgd";
  saved.optimizerSteps = 55;
  saved.config = "lr = 0.1\nbatch-size = 8\n# base-lr = 0.1\n# lr = 0.1\n";
  return saved;
}

TrainConfig configWith(int batchSize, OnResize onResize = OnResize::kKeepGlobalBatch) {
  TrainConfig config;
  config.batchSize = batchSize;
  config.learningRate = 0.1;
  config.seed = 42;
  config.onResize = onResize;
  return config;
}

ResumePoint planned(const storage::CheckpointContent& saved, const TrainConfig& config,
                    int worldSize, std::int64_t datasetSize = 960) {
  auto result = planResume(saved, config, worldSize, datasetSize);
  if (const std::string* refusal = std::get_if<std::string>(&result)) {
    ADD_FAILURE() << "refused: " << *refusal;
    return {};
  }
  return std::get<ResumePoint>(result);
}

std::string refusal(const storage::CheckpointContent& saved, const TrainConfig& config,
                    int worldSize) {
  auto result = planResume(saved, config, worldSize, 960);
  if (!std::holds_alternative<std::string>(result)) {
    ADD_FAILURE() << "planResume accepted what it should refuse";
    return {};
  }
  return std::get<std::string>(result);
}

TEST(ResumePlanTest, TheSameRanksContinueWhereTheCheckpointStopped) {
  const ResumePoint point = planned(savedByTwoRanks(), configWith(8), 2);
  EXPECT_EQ(point.step, 55);
  EXPECT_EQ(point.sampler, (data::SamplerPosition{1, 25}));
  EXPECT_EQ(point.optimizerSteps, 55);
  EXPECT_EQ(point.batchSize, 8);
  EXPECT_DOUBLE_EQ(point.baseLr, 0.1);
  EXPECT_TRUE(point.notes.empty());
}

TEST(ResumePlanTest, KeepGlobalBatchSplitsTheSavedGlobalBatchOverTheNewRanks) {
  // 2 x 8 -> 4 x 4: the same 16 samples a step, the same position, the same learning rate, even
  // under --scale-lr (the saved base rate is kept, not scaled again by 4).
  TrainConfig config = configWith(8);
  config.scaleLr = true;
  const ResumePoint point = planned(savedByTwoRanks(), config, 4);
  EXPECT_EQ(point.batchSize, 4);
  EXPECT_EQ(point.sampler, (data::SamplerPosition{1, 25}));
  EXPECT_DOUBLE_EQ(point.baseLr, 0.1);
  ASSERT_EQ(point.notes.size(), 1u);
  EXPECT_THAT(point.notes[0], HasSubstr("global batch kept at 16 (4 per rank instead of 8)"));
}

TEST(ResumePlanTest, KeepGlobalBatchRefusesARankCountThatDoesNotDivideIt) {
  EXPECT_THAT(refusal(savedByTwoRanks(), configWith(8), 3),
              HasSubstr("global batch of 16 (2 ranks x 8) cannot be split evenly over 3 ranks"));
}

TEST(ResumePlanTest, KeepPerRankBatchScalesTheLearningRateWithTheGlobalBatch) {
  // 2 x 8 -> 3 x 8: global batch 24, lr x 24/16. Position: 25 steps x 16 = 400 samples seen,
  // 16 full new steps (384), so 16 samples are seen twice.
  const ResumePoint point =
      planned(savedByTwoRanks(), configWith(8, OnResize::kKeepPerRankBatch), 3);
  EXPECT_EQ(point.batchSize, 8);
  EXPECT_DOUBLE_EQ(point.baseLr, 0.15);
  EXPECT_EQ(point.sampler, (data::SamplerPosition{1, 16}));
  ASSERT_EQ(point.notes.size(), 2u);
  EXPECT_THAT(point.notes[1], HasSubstr("16 samples are seen twice"));
}

TEST(ResumePlanTest, ResizesComposeFromTheRateTheSavedRunUsed) {
  // A checkpoint of a run that was itself resized: its base rate 0.15 with --lr 0.1, at 3 x 8.
  storage::CheckpointContent saved = savedByTwoRanks();
  saved.worldSize = 3;
  saved.sampler = {1, 10};
  saved.config = "lr = 0.1\n# base-lr = 0.15\n# lr = 0.1\n";
  const ResumePoint point = planned(saved, configWith(8, OnResize::kKeepPerRankBatch), 1);
  EXPECT_DOUBLE_EQ(point.baseLr, 0.05);  // 0.15 x 8/24
  EXPECT_EQ(point.sampler, (data::SamplerPosition{1, 30}));
  // A changed --lr scales whatever the rules give.
  TrainConfig halved = configWith(8, OnResize::kKeepPerRankBatch);
  halved.learningRate = 0.05;
  EXPECT_DOUBLE_EQ(planned(saved, halved, 1).baseLr, 0.025);
}

TEST(ResumePlanTest, APositionPastTheNewEpochMovesToTheNextEpoch) {
  // 1 rank x 8, 800 samples into epoch 0, resumed on 4 ranks x 2: step 100 of the epoch, which
  // has 120 steps of 960 samples, but only 50 of 400.
  storage::CheckpointContent saved = savedByTwoRanks();
  saved.worldSize = 1;
  saved.sampler = {0, 100};
  EXPECT_EQ(planned(saved, configWith(8), 4).sampler, (data::SamplerPosition{0, 100}));
  EXPECT_EQ(planned(saved, configWith(8), 4, 400).sampler, (data::SamplerPosition{1, 0}));
}

TEST(ResumePlanTest, AnotherSeedIsNotedAsAnotherDataOrder) {
  TrainConfig config = configWith(8);
  config.seed = 7;
  const ResumePoint point = planned(savedByTwoRanks(), config, 2);
  ASSERT_EQ(point.notes.size(), 1u);
  EXPECT_THAT(point.notes[0], HasSubstr("--seed 7 differs from the saved run's 42"));
}

TEST(ResumePlanTest, DataTooSmallForTheRanksIsRefused) {
  auto result = planResume(savedByTwoRanks(), configWith(8), 4, 3);
  ASSERT_TRUE(std::holds_alternative<std::string>(result));
  EXPECT_THAT(std::get<std::string>(result), HasSubstr("cannot resume: a dataset of 3 samples"));
}

}  // namespace
}  // namespace ringtrain::training
