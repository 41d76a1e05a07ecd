// LinearRegressionDataset: samples of y = slope * x + intercept + noise, the example every
// distributed-TensorFlow tutorial starts with (there: w = 2, b = 10).
//
// Like SyntheticDataset, sample i is a function of (seed, firstIndex + i) alone: x is uniform in
// [-1, 1), the noise uniform with the given standard deviation, so a rank computes only the
// samples its shard asks for.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace ringtrain::data {

struct LinearRegressionOptions {
  double slope = 2.0;
  double intercept = 10.0;
  double noise = 0.1;  // standard deviation of the additive noise
  std::int64_t size = 8000;
  std::uint64_t seed = 42;
  std::int64_t firstIndex = 0;  // a test set starts where the training set ends
};

class LinearRegressionDataset {
 public:
  // Throws DataError for a non-positive size or a negative noise.
  explicit LinearRegressionDataset(const LinearRegressionOptions& options);

  std::int64_t size() const { return options_.size; }
  // Writes x of samples indices[0], indices[1], ... into `inputs` and their y into `targets`.
  // An index outside [0, size()) throws std::out_of_range.
  void gather(std::span<const std::int64_t> indices, float* inputs, float* targets) const;
  std::string describe() const;

 private:
  LinearRegressionOptions options_;
};

}  // namespace ringtrain::data
