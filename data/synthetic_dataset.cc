#include "data/synthetic_dataset.h"

#include <limits>
#include <stdexcept>
#include <string>

#include "data/data_error.h"
#include "data/random.h"

namespace ringtrain::data {
namespace {

// Separate streams for labels, prototypes and noise, so that changing one never shifts another.
enum Stream : std::uint64_t { kLabels = 1, kPrototypes = 2, kNoise = 3 };

void check(bool ok, const std::string& what) {
  if (!ok) throw DataError("synthetic data: " + what);
}

}  // namespace

SyntheticDataset::SyntheticDataset(const SyntheticOptions& options) : options_(options) {
  const SampleShape& s = options.shape;
  check(s.channels >= 1 && s.height >= 1 && s.width >= 1,
        "shape " + toString(s) + " has a dimension below 1");
  // gather's callers allocate batch x elements floats: keep one sample well inside int32 range.
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 30;
  check(s.channels <= kMaxElements && s.height <= kMaxElements && s.width <= kMaxElements &&
            s.channels * s.height <= kMaxElements && s.elements() <= kMaxElements,
        "shape " + toString(s) + " has more than 2^30 values per sample");
  check(options.numClasses >= 1,
        "number of classes " + std::to_string(options.numClasses) + " is below 1");
  check(options.size >= 1, "size " + std::to_string(options.size) + " is below 1");
  check(options.firstIndex >= 0 &&
            options.firstIndex <= std::numeric_limits<std::int64_t>::max() - options.size,
        "first index " + std::to_string(options.firstIndex) + " is out of range");
}

std::int32_t SyntheticDataset::label(std::int64_t i) const {
  const std::uint64_t r =
      hash64(hash64(options_.seed, kLabels), static_cast<std::uint64_t>(options_.firstIndex + i));
  // The top 32 bits scaled to [0, classes): no modulo, so no class is favoured beyond 2^-32.
  return static_cast<std::int32_t>(((r >> 32) * static_cast<std::uint64_t>(options_.numClasses)) >>
                                   32);
}

void SyntheticDataset::gather(std::span<const std::int64_t> indices, float* images,
                              std::int32_t* labels) const {
  const std::uint64_t prototypeKey = hash64(options_.seed, kPrototypes);
  const std::uint64_t noiseKey = hash64(options_.seed, kNoise);
  const std::size_t elements = static_cast<std::size_t>(options_.shape.elements());
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const std::int64_t i = indices[j];
    if (i < 0 || i >= options_.size) {
      throw std::out_of_range("SyntheticDataset::gather: index " + std::to_string(i) +
                              " outside [0, " + std::to_string(options_.size) + ")");
    }
    const std::int32_t c = label(i);
    const KeyedHash prototype(hash64(prototypeKey, static_cast<std::uint64_t>(c)));
    const KeyedHash noise(hash64(noiseKey, static_cast<std::uint64_t>(options_.firstIndex + i)));
    float* target = images + j * elements;
    // Both halves lie in [0, 0.5): the sum stays in [0, 1) like a scaled image.
    for (std::size_t k = 0; k < elements; ++k) {
      target[k] = 0.5f * unitFloat(prototype(k)) + 0.5f * unitFloat(noise(k));
    }
    labels[j] = c;
  }
}

std::string SyntheticDataset::describe() const {
  return "synthetic (seed " + std::to_string(options_.seed) + ", samples " +
         std::to_string(options_.firstIndex) + " to " +
         std::to_string(options_.firstIndex + options_.size - 1) +
         "): " + std::to_string(options_.size) + " samples of " + toString(options_.shape) + ", " +
         std::to_string(options_.numClasses) + " classes";
}

DatasetPair makeSyntheticPair(const SyntheticOptions& train, std::int64_t testSize) {
  DatasetPair pair;
  pair.train = std::make_unique<SyntheticDataset>(train);  // checks firstIndex + size first
  SyntheticOptions test = train;
  test.firstIndex = train.firstIndex + train.size;
  test.size = testSize;
  pair.test = std::make_unique<SyntheticDataset>(test);
  return pair;
}

}  // namespace ringtrain::data
