// The models learn: linreg recovers y = 2x + 10 from noisy samples, and the mlp and cnn fit a
// small batch with random labels, each with a few hundred steps of plain SGD written out here
// over the flat buffers (optimisers live in src/).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "models/model_factory.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

void sgdStep(Model<float>& model, float learningRate) {
  const auto parameters = model.parameters();
  const auto gradients = model.gradients();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    parameters[i] -= learningRate * gradients[i];
}

// Normal(0, 1) by Box-Muller on SplitMix64: the same numbers on every platform.
double standardNormal(SplitMix64& generator) {
  const double u = 0.5 + generator.symmetric(0.5);
  const double v = 0.5 + generator.symmetric(0.5);
  return std::sqrt(-2 * std::log1p(-u)) * std::cos(2 * std::numbers::pi * v);
}

TEST(TrainingTest, LinearRegressionLearnsTwoXPlusTen) {
  auto model = makeModel<float>({.name = "linreg", .input = {1, 1, 1}});
  model.initialize(1);
  SplitMix64 generator(2);
  const Index batch = 32;
  std::vector<float> x(batch), y(batch);
  for (int step = 0; step < 400; ++step) {
    for (Index b = 0; b < batch; ++b) {
      x[b] = static_cast<float>(generator.symmetric(2));
      y[b] = static_cast<float>(2 * x[b] + 10 + 0.1 * standardNormal(generator));
    }
    model.forward({x, {}, y});
    model.backward();
    sgdStep(model, 0.05f);
  }
  const float w = model.parameters()[model.parameter("linear.weight").offset];
  const float b = model.parameters()[model.parameter("linear.bias").offset];
  EXPECT_NEAR(w, 2.0f, 0.05f);
  EXPECT_NEAR(b, 10.0f, 0.1f);
}

struct LabelledBatch {
  std::vector<float> inputs;
  std::vector<std::int32_t> labels;
};

LabelledBatch randomLabelledBatch(SampleShape shape, Index samples, Index classes) {
  LabelledBatch data;
  for (const double v :
       test_support::uniformValues(static_cast<std::size_t>(shape.size() * samples), 0, 1, 31))
    data.inputs.push_back(static_cast<float>(v));
  SplitMix64 generator(32);
  for (Index b = 0; b < samples; ++b)
    data.labels.push_back(static_cast<std::int32_t>(generator.next() % classes));
  return data;
}

// Trains on one batch for `steps` steps; returns the last step's result.
BatchResult overfit(Model<float>& model, const LabelledBatch& data, int steps, float rate) {
  BatchResult result;
  for (int step = 0; step < steps; ++step) {
    result = model.forward({data.inputs, data.labels, {}});
    model.backward();
    sgdStep(model, rate);
  }
  return model.evaluate({data.inputs, data.labels, {}});
}

TEST(TrainingTest, MlpMemorisesASmallBatchWithRandomLabels) {
  const ModelSpec spec{.name = "mlp", .input = {20, 1, 1}, .classes = 4, .hidden = {32}};
  auto model = makeModel<float>(spec);
  model.initialize(3);
  const LabelledBatch data = randomLabelledBatch(spec.input, 16, spec.classes);
  const BatchResult before = model.evaluate({data.inputs, data.labels, {}});
  const BatchResult after = overfit(model, data, 300, 0.5f);
  EXPECT_EQ(after.correct, 16);
  EXPECT_LT(after.meanLoss(), 0.05);
  EXPECT_GT(before.meanLoss(), 1.0);  // about log 4 = 1.39 before training
}

TEST(TrainingTest, CnnMemorisesASmallBatchWithRandomLabels) {
  const ModelSpec spec{.name = "cnn", .input = {1, 8, 8}, .classes = 3, .hidden = {}};
  auto model = makeModel<float>(spec);
  model.initialize(4);
  const LabelledBatch data = randomLabelledBatch(spec.input, 12, spec.classes);
  const BatchResult after = overfit(model, data, 150, 0.1f);
  EXPECT_EQ(after.correct, 12);
  EXPECT_LT(after.meanLoss(), 0.05);
}

}  // namespace
}  // namespace ringtrain::models
