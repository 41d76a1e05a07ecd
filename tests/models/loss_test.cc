// The losses: values worked out by hand, numerical stability, the correct count, target checks,
// and their gradients against finite differences in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/mean_squared_error.h"
#include "models/softmax_cross_entropy.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

using test_support::kGradientTolerance;

LossTotals computeLoss(Loss<double>& loss, const std::vector<double>& outputs, Index rows,
                       const Targets<double>& targets, std::vector<double>* gradient = nullptr) {
  const Index batch = static_cast<Index>(outputs.size()) / rows;
  loss.reserve(rows, batch);
  const ConstBatchView<double> view(outputs.data(), rows, batch);
  if (gradient == nullptr) return loss.compute(view, targets, nullptr);
  gradient->assign(outputs.size(), 0.0);
  BatchView<double> g(gradient->data(), rows, batch);
  return loss.compute(view, targets, &g);
}

TEST(SoftmaxCrossEntropyTest, LossIsLogSumExpMinusTheLabelsLogit) {
  SoftmaxCrossEntropy<double> loss;
  const std::vector<std::int32_t> labels{2, 0};
  // Sample 0: logits (1, 2, 3), label 2: log(e + e² + e³) − 3 = log(1 + e⁻¹ + e⁻²) = 0.40760596.
  // Sample 1: logits (0, 0, 0), label 0: log 3 = 1.09861229.
  const auto totals = computeLoss(loss, {1, 2, 3, 0, 0, 0}, 3, {labels, {}});
  EXPECT_NEAR(totals.loss, 0.40760596444438 + 1.09861228866811, 1e-12);
}

TEST(SoftmaxCrossEntropyTest, HugeLogitsDoNotOverflow) {
  SoftmaxCrossEntropy<double> loss;
  SoftmaxCrossEntropy<float> lossFloat;
  const std::vector<std::int32_t> labels{1};
  // log(1 + e⁻¹) = 0.31326169, whatever the common offset; exp(1000) alone would overflow.
  EXPECT_NEAR(computeLoss(loss, {1000, 1001}, 2, {labels, {}}).loss, 0.31326168751822, 1e-12);
  const std::vector<float> logits{1000, 1001};
  lossFloat.reserve(2, 1);
  const auto totals =
      lossFloat.compute(ConstBatchView<float>(logits.data(), 2, 1), {labels, {}}, nullptr);
  EXPECT_NEAR(totals.loss, 0.31326168751822, 1e-6);
}

TEST(SoftmaxCrossEntropyTest, CountsSamplesWhoseFirstLargestLogitIsTheLabel) {
  SoftmaxCrossEntropy<double> loss;
  // Right; wrong; a tie between classes 0 and 2 goes to class 0 (right for label 0, wrong for
  // label 2), as argmax would have it.
  const std::vector<double> logits{0, 5, 1, 3, 2, 1, 4, 0, 4, 4, 0, 4};
  const std::vector<std::int32_t> labels{1, 1, 0, 2};
  EXPECT_EQ(computeLoss(loss, logits, 3, {labels, {}}).correct, 2);
}

TEST(SoftmaxCrossEntropyTest, GradientIsSoftmaxMinusOneHotOverBatch) {
  SoftmaxCrossEntropy<double> loss;
  const std::vector<std::int32_t> labels{1};
  std::vector<double> gradient;
  computeLoss(loss, {0, std::log(3.0)}, 2, {labels, {}}, &gradient);
  // softmax = (1/4, 3/4); minus one-hot(1) = (1/4, -1/4).
  EXPECT_NEAR(gradient[0], 0.25, 1e-15);
  EXPECT_NEAR(gradient[1], -0.25, 1e-15);
}

TEST(SoftmaxCrossEntropyTest, GradientMatchesFiniteDifferencesOfTheMeanLoss) {
  SoftmaxCrossEntropy<double> loss;
  const Index classes = 5, batch = 4;
  std::vector<double> logits = test_support::uniformValues(classes * batch, -3, 3, 7);
  const std::vector<std::int32_t> labels{4, 0, 2, 2};
  std::vector<double> analytic;
  computeLoss(loss, logits, classes, {labels, {}}, &analytic);
  const auto numeric = test_support::numericGradient(logits, [&] {
    return computeLoss(loss, logits, classes, {labels, {}}).loss / static_cast<double>(batch);
  });
  const auto error = test_support::compareGradients(analytic, numeric);
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(SoftmaxCrossEntropyTest, RejectsLabelsOutOfRangeOrOfTheWrongCount) {
  SoftmaxCrossEntropy<double> loss;
  const std::vector<std::int32_t> outOfRange{3};
  const std::vector<std::int32_t> negative{-1};
  const std::vector<std::int32_t> tooMany{0, 1};
  EXPECT_THROW(computeLoss(loss, {1, 2, 3}, 3, {outOfRange, {}}), std::invalid_argument);
  EXPECT_THROW(computeLoss(loss, {1, 2, 3}, 3, {negative, {}}), std::invalid_argument);
  EXPECT_THROW(computeLoss(loss, {1, 2, 3}, 3, {tooMany, {}}), std::invalid_argument);
}

TEST(MeanSquaredErrorTest, LossIsTheMeanOverOutputsSummedOverSamples) {
  MeanSquaredError<double> loss;
  const std::vector<double> targets{0, 1, 2, 2};
  // Two samples of two outputs: ((1−0)² + (3−1)²)/2 = 2.5 and ((2−2)² + (0−2)²)/2 = 2.
  EXPECT_DOUBLE_EQ(computeLoss(loss, {1, 3, 2, 0}, 2, {{}, targets}).loss, 4.5);
}

TEST(MeanSquaredErrorTest, GradientMatchesFiniteDifferencesOfTheMeanLoss) {
  MeanSquaredError<double> loss;
  const Index outputs = 3, batch = 4;
  std::vector<double> values = test_support::uniformValues(outputs * batch, -2, 2, 8);
  const std::vector<double> targets = test_support::uniformValues(outputs * batch, -2, 2, 9);
  std::vector<double> analytic;
  computeLoss(loss, values, outputs, {{}, targets}, &analytic);
  const auto numeric = test_support::numericGradient(values, [&] {
    return computeLoss(loss, values, outputs, {{}, targets}).loss / static_cast<double>(batch);
  });
  const auto error = test_support::compareGradients(analytic, numeric);
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(MeanSquaredErrorTest, RejectsTargetsOfTheWrongCount) {
  MeanSquaredError<double> loss;
  const std::vector<double> targets{1, 2, 3};
  EXPECT_THROW(computeLoss(loss, {1, 2}, 1, {{}, targets}), std::invalid_argument);
}

// The model lets the loss write its gradient over the outputs (Loss::compute): the totals and the
// gradient must be those of a separate buffer, to the bit. 3,000 classes take scaledSoftmax
// through several chunks; sample 1 ties its label with an earlier class, sample 2 holds the
// maximum at its label.
template <class LossKind>
void expectInPlaceEqualsSeparate(Index rows, const Targets<float>& targets) {
  const Index batch = 3;
  std::vector<float> outputs(static_cast<std::size_t>(rows * batch));
  for (std::size_t k = 0; k < outputs.size(); ++k)
    outputs[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)) * 4);
  if (!targets.labels.empty()) {
    outputs[static_cast<std::size_t>(rows + targets.labels[1])] = 9;
    outputs[static_cast<std::size_t>(rows)] = 9;
    outputs[static_cast<std::size_t>(2 * rows + targets.labels[2])] = 9;
  }
  LossKind separateLoss, inPlaceLoss;
  separateLoss.reserve(rows, batch);
  inPlaceLoss.reserve(rows, batch);
  std::vector<float> gradient(outputs.size());
  BatchView<float> separate(gradient.data(), rows, batch);
  const LossTotals want =
      separateLoss.compute(ConstBatchView<float>(outputs.data(), rows, batch), targets, &separate);
  BatchView<float> over(outputs.data(), rows, batch);
  const LossTotals got =
      inPlaceLoss.compute(ConstBatchView<float>(outputs.data(), rows, batch), targets, &over);
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_EQ(outputs, gradient);
}

TEST(SoftmaxCrossEntropyTest, GradientOverTheLogitsEqualsASeparateOne) {
  const std::vector<std::int32_t> labels{5, 2'999, 1'234};
  expectInPlaceEqualsSeparate<SoftmaxCrossEntropy<float>>(3'000, {labels, {}});
}

TEST(MeanSquaredErrorTest, GradientOverTheOutputsEqualsASeparateOne) {
  const std::vector<float> targets(3 * 7, 0.5F);
  expectInPlaceEqualsSeparate<MeanSquaredError<float>>(7, {{}, targets});
}

}  // namespace
}  // namespace ringtrain::models
