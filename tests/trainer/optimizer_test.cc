// Optimisers against their update rules written out by hand, and bucketed updates against
// whole-buffer ones.
#include "src/trainer/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "src/trainer/lr_schedule.h"

namespace ringtrain {
namespace {

// With zero gradients only decay moves a parameter: the undecayed ranges (a GPT's biases and
// LayerNorm gains) must stay where they are, in every optimiser, also for a bucket that starts
// or ends inside a range.
TEST(OptimizerTest, WeightDecaySkipsTheUndecayedRanges) {
  for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    OptimizerOptions options;
    options.kind = kind;
    options.weightDecay = 0.5f;
    options.undecayed = {{2, 4}, {6, 7}};
    auto optimizer = makeOptimizer(options, 8);
    std::vector<float> p(8, 1.0f);
    const std::vector<float> g(8, 0.0f);
    optimizer->update(p, g, 0, 3, 0.1f);
    optimizer->update(p, g, 3, 8, 0.1f);
    optimizer->finishStep();
    for (std::size_t i = 0; i < p.size(); ++i) {
      const bool undecayed = (i >= 2 && i < 4) || i == 6;
      if (undecayed) {
        EXPECT_EQ(p[i], 1.0f) << nameIn(kOptimizerNames, kind) << " element " << i;
      } else {
        EXPECT_LT(p[i], 1.0f) << nameIn(kOptimizerNames, kind) << " element " << i;
      }
    }
  }
}

TEST(OptimizerTest, PlainSgdStepsAgainstTheGradientPlusWeightDecay) {
  OptimizerOptions o;
  o.momentum = 0;
  o.weightDecay = 0.1f;
  auto sgd = makeOptimizer(o, 2);
  std::vector<float> p = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, 0.25f};
  sgd->step(p, g, 0.1f);
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.1f * (0.5f + 0.1f * 1.0f));
  EXPECT_FLOAT_EQ(p[1], -2.0f - 0.1f * (0.25f + 0.1f * -2.0f));
}

TEST(OptimizerTest, SgdMomentumAccumulatesVelocityAsPyTorchDoes) {
  OptimizerOptions o;
  o.momentum = 0.9f;
  auto sgd = makeOptimizer(o, 1);
  std::vector<float> p = {1.0f};
  sgd->step(p, std::vector<float>{1.0f}, 0.1f);  // v = 1, p = 0.9
  sgd->step(p, std::vector<float>{2.0f}, 0.1f);  // v = 0.9 + 2 = 2.9, p = 0.9 - 0.29
  EXPECT_FLOAT_EQ(p[0], 0.61f);
  EXPECT_FLOAT_EQ(sgd->state()[0][0], 2.9f);
}

TEST(OptimizerTest, NesterovStepsAlongGradientPlusMomentumTimesVelocity) {
  OptimizerOptions o;
  o.momentum = 0.5f;
  o.nesterov = true;
  auto sgd = makeOptimizer(o, 1);
  std::vector<float> p = {0.0f};
  sgd->step(p, std::vector<float>{1.0f}, 1.0f);  // v = 1, step 1 + 0.5 = 1.5
  EXPECT_FLOAT_EQ(p[0], -1.5f);
  sgd->step(p, std::vector<float>{1.0f}, 1.0f);  // v = 1.5, step 1 + 0.75
  EXPECT_FLOAT_EQ(p[0], -3.25f);
}

TEST(OptimizerTest, AdamFirstStepMovesEachParameterByAboutTheLearningRate) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  auto adam = makeOptimizer(o, 3);
  std::vector<float> p = {1.0f, 1.0f, 1.0f};
  adam->step(p, std::vector<float>{10.0f, -0.001f, 3.0f}, 0.01f);
  // Bias-corrected m/sqrt(v) is g/|g| on the first step.
  EXPECT_NEAR(p[0], 0.99f, 1e-6);
  EXPECT_NEAR(p[1], 1.01f, 1e-5);
  EXPECT_NEAR(p[2], 0.99f, 1e-6);
}

TEST(OptimizerTest, AdamSecondStepMatchesTheBiasCorrectedFormula) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  auto adam = makeOptimizer(o, 1);
  std::vector<float> p = {0.0f};
  adam->step(p, std::vector<float>{1.0f}, 0.1f);
  adam->step(p, std::vector<float>{0.5f}, 0.1f);
  const double m = 0.9 * 0.1 + 0.1 * 0.5;         // m after two steps
  const double v = 0.999 * 0.001 + 0.001 * 0.25;  // v after two steps
  const double mHat = m / (1 - 0.81), vHat = v / (1 - 0.999 * 0.999);
  EXPECT_NEAR(p[0], -0.1 - 0.1 * mHat / (std::sqrt(vHat) + 1e-8), 1e-6);
}

TEST(OptimizerTest, AdamWDecaysTheWeightsApartFromTheGradient) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdamW;
  o.weightDecay = 0.5f;
  auto adamw = makeOptimizer(o, 1);
  std::vector<float> p = {2.0f};
  adamw->step(p, std::vector<float>{1.0f}, 0.1f);
  EXPECT_NEAR(p[0], 2.0f * (1.0f - 0.1f * 0.5f) - 0.1f, 1e-6);
}

TEST(OptimizerTest, UpdatingBucketByBucketEqualsOneWholeStep) {
  for (const auto& [kind, name] : kOptimizerNames) {
    OptimizerOptions o;
    o.kind = kind;
    o.weightDecay = 0.01f;
    auto whole = makeOptimizer(o, 100);
    auto buckets = makeOptimizer(o, 100);
    std::vector<float> a(100), b(100), g(100);
    for (int i = 0; i < 100; ++i) {
      a[i] = b[i] = std::sin(static_cast<float>(i));
      g[i] = std::cos(static_cast<float>(i) * 0.3f);
    }
    for (int step = 0; step < 3; ++step) {
      whole->step(a, g, 0.05f);
      buckets->update(b, g, 60, 100, 0.05f);  // last layers first, as the engine does
      buckets->update(b, g, 0, 60, 0.05f);
      buckets->finishStep();
    }
    EXPECT_EQ(a, b) << name;
  }
}

TEST(LrScheduleTest, WarmUpRisesLinearlyToTheBaseRate) {
  LrScheduleOptions o;
  o.baseLr = 0.4;
  o.warmupSteps = 4;
  EXPECT_DOUBLE_EQ(learningRateAt(o, 0), 0.1);
  EXPECT_DOUBLE_EQ(learningRateAt(o, 3), 0.4);
  EXPECT_DOUBLE_EQ(learningRateAt(o, 100), 0.4);
}

TEST(LrScheduleTest, StepScheduleDecaysEveryStepSizeStepsAfterWarmUp) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kStep;
  o.baseLr = 1.0;
  o.warmupSteps = 2;
  o.stepSize = 10;
  o.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learningRateAt(o, 11), 1.0);
  EXPECT_DOUBLE_EQ(learningRateAt(o, 12), 0.5);
  EXPECT_DOUBLE_EQ(learningRateAt(o, 22), 0.25);
  EXPECT_DOUBLE_EQ(learningRateAt(o, 32), 0.125);
}

TEST(LrScheduleTest, CosineGoesFromTheBaseRateToZeroOverTheRun) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.baseLr = 2.0;
  o.totalSteps = 100;  // as PyTorch's CosineAnnealingLR with T_max = 100
  EXPECT_DOUBLE_EQ(learningRateAt(o, 0), 2.0);
  EXPECT_NEAR(learningRateAt(o, 50), 1.0, 1e-12);
  EXPECT_NEAR(learningRateAt(o, 100), 0.0, 1e-12);
  EXPECT_GT(learningRateAt(o, 99), 0.0);
}

}  // namespace
}  // namespace ringtrain
