// SyntheticDataset: generated samples of any shape, class count and size, for benchmarks (as
// Horovod's synthetic benchmark) and for training without MNIST.
//
// Sample i is a function of (seed, firstIndex + i) alone: a rank generates only the samples its
// shard asks for, in any order, and gets the same values as every other rank and every run.
// Each class has a fixed random prototype image; a sample is its class's prototype plus uniform
// noise of the same strength, so a classifier can learn it (the prototypes are far apart in many
// pixels) but not in one step.
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace ringtrain::data {

struct SyntheticOptions {
  SampleShape shape{1, 28, 28};
  int numClasses = 10;
  std::int64_t size = 60000;
  std::uint64_t seed = 42;
  // Sample i of this dataset is the generator's sample firstIndex + i: a test set drawn from the
  // same prototypes but with other samples starts where the training set ends.
  std::int64_t firstIndex = 0;
};

class SyntheticDataset final : public Dataset {
 public:
  // Throws DataError (one line naming the option) for a non-positive size, class count or
  // dimension, or a sample too large to index.
  explicit SyntheticDataset(const SyntheticOptions& options);

  std::int64_t size() const override { return options_.size; }
  SampleShape sampleShape() const override { return options_.shape; }
  int numClasses() const override { return options_.numClasses; }
  void gather(std::span<const std::int64_t> indices, float* images,
              std::int32_t* labels) const override;
  std::string describe() const override;

  // The class of sample i (in [0, size())), without generating its pixels.
  std::int32_t label(std::int64_t i) const;

 private:
  SyntheticOptions options_;
};

// A training set of `train` and a test set of testSize further samples from the same generator.
DatasetPair makeSyntheticPair(const SyntheticOptions& train, std::int64_t testSize);

}  // namespace ringtrain::data
