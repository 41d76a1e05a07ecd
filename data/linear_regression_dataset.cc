#include "data/linear_regression_dataset.h"

#include <cmath>
#include <stdexcept>

#include "data/data_error.h"
#include "data/random.h"

namespace ringtrain::data {
namespace {
enum Stream : std::uint64_t { kInputs = 11, kNoise = 12 };
}  // namespace

LinearRegressionDataset::LinearRegressionDataset(const LinearRegressionOptions& options)
    : options_(options) {
  if (options.size < 1) {
    throw DataError("linear regression data: size " + std::to_string(options.size) + " is below 1");
  }
  if (!(options.noise >= 0)) throw DataError("linear regression data: negative noise");
}

void LinearRegressionDataset::gather(std::span<const std::int64_t> indices, float* inputs,
                                     float* targets) const {
  const KeyedHash inputHash(hash64(options_.seed, kInputs));
  const KeyedHash noiseHash(hash64(options_.seed, kNoise));
  // Uniform noise on [-a, a) has standard deviation a / sqrt(3).
  const double halfWidth = options_.noise * std::sqrt(3.0);
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const std::int64_t i = indices[j];
    if (i < 0 || i >= options_.size) {
      throw std::out_of_range("LinearRegressionDataset::gather: index " + std::to_string(i) +
                              " outside [0, " + std::to_string(options_.size) + ")");
    }
    const auto key = static_cast<std::uint64_t>(options_.firstIndex + i);
    const double x = 2.0 * unitFloat(inputHash(key)) - 1.0;
    const double noise = halfWidth * (2.0 * unitFloat(noiseHash(key)) - 1.0);
    inputs[j] = static_cast<float>(x);
    targets[j] = static_cast<float>(options_.slope * x + options_.intercept + noise);
  }
}

std::string LinearRegressionDataset::describe() const {
  return "linear regression y = " + std::to_string(options_.slope) + " x + " +
         std::to_string(options_.intercept) + " + noise (sd " + std::to_string(options_.noise) +
         "): " + std::to_string(options_.size) + " samples";
}

}  // namespace ringtrain::data
