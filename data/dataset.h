// Dataset: what the trainer reads samples from, whatever stores them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::data {

// One sample's shape, channels x height x width (MNIST: 1 x 28 x 28).
struct SampleShape {
  std::int64_t channels = 1;
  std::int64_t height = 1;
  std::int64_t width = 1;

  std::int64_t elements() const { return channels * height * width; }
  bool operator==(const SampleShape&) const = default;
};

// "1x28x28".
std::string toString(const SampleShape& shape);

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::int64_t size() const = 0;
  virtual SampleShape sampleShape() const = 0;
  virtual int numClasses() const = 0;

  // How many labels one sample has: 1 for an image (its class), `context` for a window of
  // tokens (the next token at every position).
  virtual std::int64_t labelsPerSample() const { return 1; }

  // The batch contract with models/: writes samples indices[0], indices[1], ... one after the
  // other, each sampleShape().elements() float32 values (C x H x W, row-major) into `images`
  // (room for indices.size() x elements()): pixels scaled to [0, 1], or token ids as exact floats
  // for a token dataset. Their labels, each in [0, numClasses()), go into `labels` (room for
  // indices.size() x labelsPerSample()), sample after sample. An index outside [0, size())
  // throws std::out_of_range. Implementations keep no mutable state, so gather may be called from
  // several threads at once (a prefetching loader, say).
  virtual void gather(std::span<const std::int64_t> indices, float* images,
                      std::int32_t* labels) const = 0;
  // One line for the log: where the samples come from, how many, their shape and classes.
  virtual std::string describe() const = 0;
  // Whether gather reads the samples from storage (a file) rather than from memory: what a
  // prefetching loader hides.
  virtual bool readsStorage() const { return false; }
};

// Reads every sample of `dataset` in order, `batchSamples` at a time, and throws DataError naming
// the first batch that fails ("samples 128 to 255 of 512: <the reader's error>"): what a check
// that promises to find damage anywhere in a file must do (a compressed chunk is inflated only
// when one of its samples is read).
void readEverySample(const Dataset& dataset, std::int64_t batchSamples = 256);
// Reads the samples `indices` of `dataset` and throws what gather throws.
void readSamples(const Dataset& dataset, const std::vector<std::int64_t>& indices);

// A training set and the test set it is evaluated on; they share sample shape and classes.
struct DatasetPair {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> test;
};

}  // namespace ringtrain::data
