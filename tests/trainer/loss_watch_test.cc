// LossWatch: the chance-level rule of training/loss_watch.h, window by window.
#include "training/loss_watch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace ringtrain::training {
namespace {

const double kLn10 = std::log(10.0);

// Feeds windows of `every` steps from `from` to `to` with the loss `loss(last)`; returns the
// step whose window brought the warning (-1: none).
template <class LossAt>
std::int64_t firstWarning(LossWatch& watch, std::int64_t from, std::int64_t to, std::int64_t every,
                          LossAt loss) {
  std::int64_t warnedAt = -1;
  for (std::int64_t last = from + every; last <= to; last += every) {
    if (watch.observe(last - every, last, loss(last)) && warnedAt < 0) warnedAt = last;
  }
  return warnedAt;
}

TEST(LossWatch, AStuckLossIsWarnedAboutOnceAfterTheQuietStepsAndASpanAtChance) {
  LossWatch watch(10, 0, 0.1);
  EXPECT_DOUBLE_EQ(watch.chanceLoss(), kLn10);
  int warnings = 0;
  std::int64_t warnedAt = -1;
  for (std::int64_t last = 10; last <= 500; last += 10) {
    if (std::optional<std::string> w = watch.observe(last - 10, last, kLn10 + 0.001)) {
      ++warnings;
      if (warnedAt < 0) warnedAt = last;
      EXPECT_NE(w->find("chance level ln(10) = 2.3026 from step 101 to 200"), std::string::npos)
          << *w;
      EXPECT_NE(w->find("--lr (now 0.1)"), std::string::npos) << *w;
    }
  }
  // Windows count once they end after step 100; the first counting one is (100, 110].
  EXPECT_EQ(warnedAt, 200);
  EXPECT_EQ(warnings, 1);
}

TEST(LossWatch, AHealthyRunIsNotWarnedAbout) {
  // Near chance for the first 100 steps (the quiet ones), then falling.
  LossWatch watch(10, 0, 0.1);
  EXPECT_EQ(firstWarning(watch, 0, 2000, 10,
                         [](std::int64_t step) { return step <= 100 ? kLn10 : 2.0 * 100 / step; }),
            -1);
}

TEST(LossWatch, ALossOutsideTheToleranceBreaksTheSpan) {
  LossWatch watch(10, 0, 0.1);
  // Within 5% of ln(10) except every fifth window of 10 steps: spans of 40 steps only.
  EXPECT_EQ(
      firstWarning(watch, 0, 2000, 10,
                   [](std::int64_t step) { return step % 50 == 0 ? kLn10 * 1.06 : kLn10 * 0.96; }),
      -1);
}

TEST(LossWatch, TheQuietStepsFollowTheWarmUpOrAResumedStart) {
  LossWatch watch(10, 1000, 0.1);
  EXPECT_EQ(firstWarning(watch, 0, 2000, 100, [](std::int64_t) { return kLn10; }), 1200);
}

TEST(LossWatch, OneLongWindowAtChanceIsEnough) {
  LossWatch watch(50257, 0, 6e-4);  // a GPT's vocabulary
  EXPECT_EQ(firstWarning(watch, 0, 1000, 500, [](std::int64_t) { return 10.9; }), 500);
}

TEST(LossWatch, ARegressionOrANonFiniteLossIsNeverWarnedAbout) {
  LossWatch regression(0, 0, 0.1);
  EXPECT_EQ(firstWarning(regression, 0, 1000, 10, [](std::int64_t) { return 0.0; }), -1);
  LossWatch nan(10, 0, 0.1);
  EXPECT_EQ(firstWarning(nan, 0, 1000, 10,
                         [](std::int64_t) { return std::numeric_limits<double>::quiet_NaN(); }),
            -1);
}

TEST(LossWatch, TheDivergenceMessageNamesTheStepAndTheLearningRate) {
  EXPECT_EQ(
      divergenceMessage("the training loss", std::numeric_limits<double>::quiet_NaN(), 120, 0.1),
      "the training loss is nan at step 120: training diverged; try a lower --lr (now 0.1)");
  EXPECT_EQ(divergenceMessage("the test loss", std::numeric_limits<double>::infinity(), 7, 2),
            "the test loss is inf at step 7: training diverged; try a lower --lr (now 2)");
}

}  // namespace
}  // namespace ringtrain::training
