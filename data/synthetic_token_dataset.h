// SyntheticTokenDataset: generated token sequences for a language model, for benchmarks and for
// training without a corpus (--model gpt --synthetic).
//
// Sample i is a window of context + 1 tokens, a function of (seed, firstIndex + i) alone, like
// SyntheticDataset's samples. Each sequence follows a fixed rule, next = (31·token + 7) mod V,
// except that one token in eight is drawn at random: a model can learn the rule (the loss falls
// well below ln V) but not predict the random draws.
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace ringtrain::data {

struct SyntheticTokenOptions {
  std::int64_t vocabulary = 50257;
  std::int64_t context = 128;
  std::int64_t size = 4096;  // windows
  std::uint64_t seed = 42;
  std::int64_t firstIndex = 0;
};

class SyntheticTokenDataset final : public Dataset {
 public:
  // Throws DataError naming the option for a non-positive size or context, or a vocabulary
  // below 2 or at 2^24 and above (ids must be exact as float32 values).
  explicit SyntheticTokenDataset(const SyntheticTokenOptions& options);
  std::int64_t size() const override { return options_.size; }
  SampleShape sampleShape() const override { return {1, options_.context, 1}; }
  int numClasses() const override { return static_cast<int>(options_.vocabulary); }
  std::int64_t labelsPerSample() const override { return options_.context; }
  // Inputs: the window's first `context` ids (as floats); labels: its last `context` ids.
  void gather(std::span<const std::int64_t> indices, float* images,
              std::int32_t* labels) const override;
  std::string describe() const override;

 private:
  SyntheticTokenOptions options_;
};

// A training set and a test set of testSize further windows from the same generator.
DatasetPair makeSyntheticTokenPair(const SyntheticTokenOptions& train, std::int64_t testSize);

}  // namespace ringtrain::data
