// GradientAccumulator: the last micro-batch's gradients become the mean gradient of the step's
// samples, each micro-batch weighted by its samples, layer by layer.
#include "training/gradient_accumulator.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace ringtrain::training {
namespace {

// Micro-batches of 4, 4 and 2 samples (an epoch's last, smaller batch): the result is
// (4 g0 + 4 g1 + 2 g2) / 10, in two layers announced last first, as backward does.
TEST(GradientAccumulator, TheLastMicroBatchGetsTheMeanOverTheStepsSamples) {
  GradientAccumulator accumulator(5, 4);
  const std::vector<std::vector<float>> micro = {
      {1, 2, 3, 4, 5}, {3, 2, 1, 0, -1}, {6, -4, 2, 8, 10}};
  const std::vector<std::int64_t> samples = {4, 4, 2};
  std::vector<float> gradients;
  for (int k = 0; k < 3; ++k) {
    accumulator.beginMicroBatch(k, samples[k], k == 2);
    gradients = micro[k];  // backward overwrites the buffer
    accumulator.layerReady(gradients, 3, 2);
    accumulator.layerReady(gradients, 0, 3);
  }
  for (std::size_t i = 0; i < 5; ++i) {
    const float expected = (4 * micro[0][i] + 4 * micro[1][i] + 2 * micro[2][i]) / 10;
    EXPECT_FLOAT_EQ(gradients[i], expected) << "element " << i;
  }
}

// Full micro-batches are summed and scaled by 1/K; a new step starts the sum afresh.
TEST(GradientAccumulator, EveryStepStartsAfresh) {
  GradientAccumulator accumulator(2, 8);
  std::vector<float> gradients;
  for (int step = 0; step < 2; ++step) {
    for (int k = 0; k < 2; ++k) {
      accumulator.beginMicroBatch(k, 8, k == 1);
      gradients = {static_cast<float>(10 * step + k), 1};
      accumulator.layerReady(gradients, 0, 2);
    }
    EXPECT_EQ(gradients[0], (20.0f * step + 1) / 2) << "step " << step;
    EXPECT_EQ(gradients[1], 1.0f);
  }
}

// The rule the GPU path's kernels apply: start, add, finish, with weight n_k / B and, for the
// last micro-batch, scale B / N.
TEST(GradientAccumulator, TheRuleNamesEachMicroBatchsPart) {
  GradientAccumulator accumulator(3, 4);
  accumulator.beginMicroBatch(0, 4, false);
  AccumulateRule rule = accumulator.rule();
  EXPECT_EQ(rule.phase, AccumulatePhase::kStart);
  EXPECT_FLOAT_EQ(rule.weight, 1.0f);
  accumulator.beginMicroBatch(1, 4, false);
  EXPECT_EQ(accumulator.rule().phase, AccumulatePhase::kAdd);
  accumulator.beginMicroBatch(2, 2, true);
  rule = accumulator.rule();
  EXPECT_EQ(rule.phase, AccumulatePhase::kFinish);
  EXPECT_FLOAT_EQ(rule.weight, 0.5f);
  EXPECT_FLOAT_EQ(rule.scale, 0.4f);  // B / N = 4 / 10
}

TEST(GradientAccumulator, AStepOfOneMicroBatchIsALogicError) {
  GradientAccumulator accumulator(2, 8);
  EXPECT_THROW(accumulator.beginMicroBatch(0, 8, true), std::logic_error);
}

}  // namespace
}  // namespace ringtrain::training
