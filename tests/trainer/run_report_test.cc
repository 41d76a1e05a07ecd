// Rank 0's progress line and the end-of-run report: where the run stands, how long is left from
// this run's own pace (a resumed run counts from where it resumed), durations as people write them.
#include "training/run_report.h"

#include <gtest/gtest.h>

namespace ringtrain::training {
namespace {

TEST(RunReport, DurationsReadAsMinutesAndSecondsOrHours) {
  EXPECT_EQ(formatDuration(0), "0:00");
  EXPECT_EQ(formatDuration(7.4), "0:07");
  EXPECT_EQ(formatDuration(160), "2:40");
  EXPECT_EQ(formatDuration(3723), "1:02:03");
  EXPECT_EQ(formatDuration(-3), "0:00");
}

TEST(RunReport, ProgressSaysWhereTheRunIsAndHowLongIsLeft) {
  Progress p;
  p.step = 300;
  p.steps = 945;
  p.epoch = 4;
  p.epochs = 15;
  p.loss = 0.1234;
  p.learningRate = 0.05;
  p.samplesPerSecond = 38000;
  p.ranks = 2;
  p.elapsedSeconds = 60;  // 300 steps a minute: 645 left take 2:09
  EXPECT_EQ(progressLine(p),
            "step 300/945 (epoch 4/15)  loss 0.1234  lr 0.05000  38000 samples/s (19000/rank), "
            "1:00 elapsed, ~2:09 left");
  // Resumed at step 200: only this run's 100 steps set the pace.
  p.firstStep = 200;
  EXPECT_NE(progressLine(p).find("1:00 elapsed, ~6:27 left"), std::string::npos) << progressLine(p);
}

TEST(RunReport, ALanguageModelsLineCountsTokens) {
  Progress p;
  p.step = 10;
  p.steps = 20;
  p.samplesPerSecond = 100;
  p.tokensPerSample = 128;
  p.ranks = 2;
  const std::string line = progressLine(p);
  EXPECT_NE(line.find("12800 tokens/s (6400/rank)"), std::string::npos) << line;
}

TEST(RunReport, TheReportNamesResultThroughputAndReplicas) {
  TrainingSummary summary;
  summary.steps = 10;
  summary.lastStep = 10;
  summary.trainingSeconds = 2;
  summary.samplesPerSecond = 640;
  summary.samplesPerSecondPerRank = 320;
  summary.lastEvaluation.samples = 100;
  summary.lastEvaluation.correct = 95;
  summary.lastEvaluation.predictions = 100;
  const std::vector<std::string> lines = runReport(summary, TrainConfig{}, RunFacts{});
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("done: 10 steps"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("final accuracy 0.9500"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("replicas identical"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace ringtrain::training
