// Optimisers against their update rules written out by hand, and bucketed updates against
// whole-buffer ones.
#include "training/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "training/lr_schedule.h"

namespace ringtrain::training {
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

// Two copies of the same parameters, sin(i), and the gradients cos(0.3 i).
std::tuple<std::vector<float>, std::vector<float>, std::vector<float>> twoStartingPoints(int n) {
  std::vector<float> a(n), g(n);
  for (int i = 0; i < n; ++i) {
    a[i] = std::sin(static_cast<float>(i));
    g[i] = std::cos(static_cast<float>(i) * 0.3f);
  }
  return {a, a, g};
}

TEST(OptimizerTest, UpdatingBucketByBucketEqualsOneWholeStep) {
  for (const auto& [kind, name] : kOptimizerNames) {
    OptimizerOptions o;
    o.kind = kind;
    o.weightDecay = 0.01f;
    auto whole = makeOptimizer(o, 100);
    auto buckets = makeOptimizer(o, 100);
    auto [a, b, g] = twoStartingPoints(100);
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

// ZeRO-1's index: global elements map to the runs' local offsets, one run after another.
TEST(StateIndexTest, MapsOwnedRangesToConsecutiveLocalElements) {
  const StateIndex index({{10, 20}, {30, 30}, {40, 45}});
  EXPECT_EQ(index.size(), 15u);
  ASSERT_EQ(index.runs().size(), 2u);  // the empty range is left out
  std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> pieces;
  const auto record = [&](std::size_t b, std::size_t e, std::size_t local) {
    pieces.emplace_back(b, e, local);
  };
  index.forEachPiece(12, 18, record);
  index.forEachPiece(40, 45, record);
  index.forEachPiece(7, 7, record);  // nothing to do, owned or not
  using Piece = std::tuple<std::size_t, std::size_t, std::size_t>;
  EXPECT_EQ(pieces, (std::vector<Piece>{{12, 18, 2}, {40, 45, 10}}));
  EXPECT_THROW(index.forEachPiece(15, 41, record), std::out_of_range);  // 20..39 are not owned
  EXPECT_THROW(index.forEachPiece(0, 5, record), std::out_of_range);
  EXPECT_THROW(StateIndex({{10, 20}, {15, 30}}), std::invalid_argument);  // overlapping
  EXPECT_THROW(StateIndex({{40, 45}, {10, 20}}), std::invalid_argument);  // unsorted
}

// Two optimisers that each keep state for part of the elements, updated on their parts (pieces
// that cross weight decay's ranges), give the whole optimiser's parameters and state, bit for bit.
TEST(StateIndexTest, ShardedOptimisersTogetherEqualTheWholeOne) {
  for (const auto& [kind, name] : kOptimizerNames) {
    OptimizerOptions o;
    o.kind = kind;
    o.weightDecay = 0.01f;
    o.undecayed = {{25, 35}, {90, 100}};
    auto whole = makeOptimizer(o, 100);
    const std::vector<std::pair<std::size_t, std::size_t>> mine = {{0, 30}, {60, 100}};
    auto first = makeOptimizer(o, StateIndex(mine));
    auto second = makeOptimizer(o, StateIndex({{30, 60}}));
    auto [a, b, g] = twoStartingPoints(100);
    for (int step = 0; step < 3; ++step) {
      whole->step(a, g, 0.05f);
      first->update(b, g, 60, 100, 0.05f);
      second->update(b, g, 30, 60, 0.05f);
      first->update(b, g, 0, 30, 0.05f);
      first->finishStep();
      second->finishStep();
    }
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << name;
    ASSERT_EQ(first->state().size(), whole->state().size());
    for (std::size_t s = 0; s < whole->state().size(); ++s) {
      const std::span<float> all = whole->state()[s];
      EXPECT_EQ(first->state()[s].size(), all.empty() ? 0u : 70u);
      if (all.empty()) continue;
      EXPECT_EQ(first->state()[s][29], all[29]) << name;  // run 1, local 29
      EXPECT_EQ(first->state()[s][30], all[60]) << name;  // run 2 starts at local 30
      EXPECT_EQ(second->state()[s][0], all[30]) << name;
    }
    EXPECT_EQ(first->stateBytes() + second->stateBytes(), whole->stateBytes()) << name;
  }
}

}  // namespace
}  // namespace ringtrain::training
