// Whole-model gradients against central finite differences of the mean loss, in float64, on tiny
// shapes (tolerance in gradient_check.h): every parameter of the mlp and linreg, and 40 spread
// positions of every cnn parameter tensor (all of them would take 60,000 forward passes). Also
// the property data parallelism rests on: the gradient of a batch is the mean of its halves'.
#include <gtest/gtest.h>

#include <vector>

#include "models/model_factory.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

using test_support::compareGradients;
using test_support::kGradientTolerance;
using test_support::numericGradient;

struct Data {
  std::vector<double> inputs;
  std::vector<std::int32_t> labels;
  std::vector<double> values;

  Batch<double> batch() const { return {inputs, labels, values}; }
};

Data randomData(const Model<double>& model, Index samples, std::uint64_t seed) {
  Data data;
  data.inputs = test_support::uniformValues(
      static_cast<std::size_t>(model.inputShape().size() * samples), 0, 1, seed);
  SplitMix64 generator(seed + 1);
  for (Index b = 0; b < samples; ++b) {
    data.labels.push_back(static_cast<std::int32_t>(generator.next() % model.outputSize()));
    data.values.push_back(generator.symmetric(3));
  }
  if (model.loss().needsLabels()) {
    data.values.clear();
  } else {
    data.labels.clear();
  }
  return data;
}

// The worst error over `indices` of the parameters (all when empty).
test_support::GradientError checkModel(Model<double>& model, const Data& data,
                                       const std::vector<std::size_t>& indices = {}) {
  model.forward(data.batch());
  model.backward();
  const std::vector<double> analytic(model.gradients().begin(), model.gradients().end());
  const auto numeric = numericGradient(
      model.parameters(), [&] { return model.forward(data.batch()).meanLoss(); }, indices);
  return compareGradients(analytic, numeric, indices);
}

TEST(ModelGradientTest, MlpMatchesFiniteDifferencesForEveryParameter) {
  auto model =
      makeModel<double>({.name = "mlp", .input = {6, 1, 1}, .classes = 3, .hidden = {5, 4}});
  model.initialize(17);
  // Biases start at zero; random ones make their gradient check mean more.
  for (double& p : model.parameters())
    if (p == 0) p = 0.1;
  const auto error = checkModel(model, randomData(model, 4, 18));
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(ModelGradientTest, LinearRegressionMatchesFiniteDifferences) {
  auto model = makeModel<double>({.name = "linreg", .input = {3, 1, 1}});
  model.initialize(19);
  const auto error = checkModel(model, randomData(model, 5, 20));
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(ModelGradientTest, CnnMatchesFiniteDifferencesAcrossEveryParameterTensor) {
  // Two input channels: the first convolution reads a channels-first image.
  auto model = makeModel<double>({.name = "cnn", .input = {2, 8, 8}, .classes = 3, .hidden = {}});
  model.initialize(21);
  for (double& p : model.parameters())
    if (p == 0) p = 0.05;
  std::vector<std::size_t> indices;
  SplitMix64 generator(22);
  for (const ParameterEntry& entry : model.parameterTable())
    for (int k = 0; k < 40; ++k)
      indices.push_back(entry.offset + generator.next() % entry.count);
  const auto error = checkModel(model, randomData(model, 3, 23), indices);
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(ModelGradientTest, GradientOfABatchIsTheMeanOfItsHalvesGradients) {
  auto model = makeModel<double>({.name = "cnn", .input = {1, 8, 8}, .classes = 4, .hidden = {}});
  model.initialize(24);
  const Data whole = randomData(model, 8, 25);
  const std::size_t half = whole.inputs.size() / 2;
  const Data first{{whole.inputs.begin(), whole.inputs.begin() + half},
                   {whole.labels.begin(), whole.labels.begin() + 4},
                   {}};
  const Data second{{whole.inputs.begin() + half, whole.inputs.end()},
                    {whole.labels.begin() + 4, whole.labels.end()},
                    {}};
  std::vector<double> average(model.parameterCount(), 0.0);
  for (const Data* part : {&first, &second}) {
    model.forward(part->batch());
    model.backward();
    for (std::size_t i = 0; i < average.size(); ++i)
      average[i] += model.gradients()[i] / 2;
  }
  model.forward(whole.batch());
  model.backward();
  const auto error = compareGradients(
      std::vector<double>(model.gradients().begin(), model.gradients().end()), average);
  EXPECT_LT(error.worst, 1e-12) << error.describe();
}

}  // namespace
}  // namespace ringtrain::models
