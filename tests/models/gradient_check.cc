#include "tests/models/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace ringtrain::models::test_support {
namespace {

constexpr double kDenominatorFloor = 1e-2;

std::vector<std::size_t> allIndices(std::size_t n, std::span<const std::size_t> indices) {
  if (!indices.empty()) return {indices.begin(), indices.end()};
  std::vector<std::size_t> all(n);
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

}  // namespace

std::vector<double> uniformValues(std::size_t n, double low, double high, std::uint64_t seed) {
  SplitMix64 generator(seed);
  std::vector<double> values(n);
  for (double& v : values)
    v = (low + high) / 2 + generator.symmetric((high - low) / 2);
  return values;
}

std::string GradientError::describe() const {
  std::ostringstream out;
  out << "worst relative error " << worst << " at element " << index << ": analytic " << analytic
      << ", numeric " << numeric;
  return out.str();
}

GradientError compareGradients(std::span<const double> analytic, std::span<const double> numeric,
                               std::span<const std::size_t> indices) {
  GradientError error;
  for (const std::size_t i : allIndices(analytic.size(), indices)) {
    const double a = analytic[i];
    const double n = numeric[i];
    const double relative =
        std::abs(a - n) / std::max(std::abs(a) + std::abs(n), kDenominatorFloor);
    if (relative >= error.worst) error = {relative, i, a, n};
  }
  return error;
}

std::vector<double> numericGradient(std::span<double> values, const std::function<double()>& f,
                                    std::span<const std::size_t> indices) {
  std::vector<double> gradient(values.size(), 0.0);
  for (const std::size_t i : allIndices(values.size(), indices)) {
    const double saved = values[i];
    values[i] = saved + kFiniteDifferenceStep;
    const double up = f();
    values[i] = saved - kFiniteDifferenceStep;
    const double down = f();
    values[i] = saved;
    gradient[i] = (up - down) / (2 * kFiniteDifferenceStep);
  }
  return gradient;
}

LayerHarness::LayerHarness(Layer<double>& layer, Index batch, std::uint64_t seed)
    : layer_(layer), batch_(batch) {
  const auto tied = layer.tiedParameter();
  const auto count = static_cast<std::size_t>(tied ? tied->count() : layer.parameterCount());
  parameters_ = uniformValues(count, -1, 1, seed);
  gradients_.assign(count, 0.0);
  input_ =
      uniformValues(static_cast<std::size_t>(layer.inputShape().size() * batch), -1, 1, seed + 1);
  output_.assign(static_cast<std::size_t>(layer.outputShape().size() * batch), 0.0);
  projection_ = uniformValues(output_.size(), -1, 1, seed + 2);
  layer_.bind(parameters_.data(), gradients_.data());
  layer_.reserve(batch);
}

double LayerHarness::projectedOutput() {
  layer_.forward(ConstBatchView<double>(input_.data(), layer_.inputShape().size(), batch_),
                 BatchView<double>(output_.data(), layer_.outputShape().size(), batch_));
  return std::inner_product(output_.begin(), output_.end(), projection_.begin(), 0.0);
}

std::pair<std::vector<double>, std::vector<double>> LayerHarness::analyticGradients() {
  projectedOutput();
  const ConstBatchView<double> x(input_.data(), layer_.inputShape().size(), batch_);
  const ConstBatchView<double> y(output_.data(), layer_.outputShape().size(), batch_);
  const ConstBatchView<double> dy(projection_.data(), layer_.outputShape().size(), batch_);
  std::vector<double> inputGradient(input_.size(), 0.0);
  layer_.backwardParameters(x, dy);
  layer_.backwardInput(x, y, dy,
                       BatchView<double>(inputGradient.data(), layer_.inputShape().size(), batch_));
  return {gradients_, inputGradient};
}

GradientError LayerHarness::check() {
  const auto [parameterGradient, inputGradient] = analyticGradients();
  const auto f = [this] { return projectedOutput(); };
  const GradientError parameterError =
      compareGradients(parameterGradient, numericGradient(parameters_, f));
  const GradientError inputError = compareGradients(inputGradient, numericGradient(input_, f));
  return parameterError.worst >= inputError.worst ? parameterError : inputError;
}

GradientError LayerHarness::checkParameters() {
  projectedOutput();
  layer_.backwardParameters(
      ConstBatchView<double>(input_.data(), layer_.inputShape().size(), batch_),
      ConstBatchView<double>(projection_.data(), layer_.outputShape().size(), batch_));
  const std::vector<double> analytic = gradients_;
  return compareGradients(analytic, numericGradient(parameters_, [this] { return projectedOutput(); }));
}

}  // namespace ringtrain::models::test_support
