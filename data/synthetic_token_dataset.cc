#include "data/synthetic_token_dataset.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/random.h"
#include "data/token_dataset.h"

namespace ringtrain::data {

SyntheticTokenDataset::SyntheticTokenDataset(const SyntheticTokenOptions& options)
    : options_(options) {
  if (options.size < 1) throw DataError("--synthetic-size must be at least 1");
  if (options.context < 1) throw DataError("--context must be at least 1");
  if (options.vocabulary < 2 || options.vocabulary >= (std::int64_t{1} << 24))
    throw DataError("--vocab " + std::to_string(options.vocabulary) + " must be in [2, 2^24)");
}

void SyntheticTokenDataset::gather(std::span<const std::int64_t> indices, float* images,
                                   std::int32_t* labels) const {
  const std::int64_t t = options_.context;
  const auto v = static_cast<std::uint64_t>(options_.vocabulary);
  std::vector<std::uint64_t> window(static_cast<std::size_t>(t + 1));
  for (std::size_t s = 0; s < indices.size(); ++s) {
    const std::int64_t i = indices[s];
    if (i < 0 || i >= options_.size)
      throw std::out_of_range("synthetic token window " + std::to_string(i) + " of " +
                              std::to_string(options_.size));
    const KeyedHash draws(hash64(options_.seed, static_cast<std::uint64_t>(options_.firstIndex + i)));
    window[0] = draws(0) % v;
    for (std::size_t k = 1; k < window.size(); ++k) {
      const std::uint64_t draw = draws(k);
      window[k] = (draw & 7) == 0 ? (draw >> 3) % v : (31 * window[k - 1] + 7) % v;
    }
    splitWindow(std::span<const std::uint64_t>(window), images + static_cast<std::int64_t>(s) * t,
                labels + static_cast<std::int64_t>(s) * t);
  }
}

std::string SyntheticTokenDataset::describe() const {
  return "synthetic token windows: " + std::to_string(options_.size) + " of " +
         std::to_string(options_.context) + " tokens (+1), vocabulary " +
         std::to_string(options_.vocabulary) + ", seed " + std::to_string(options_.seed);
}

DatasetPair makeSyntheticTokenPair(const SyntheticTokenOptions& train, std::int64_t testSize) {
  SyntheticTokenOptions test = train;
  test.size = testSize;
  test.firstIndex = train.firstIndex + train.size;
  return {std::make_unique<SyntheticTokenDataset>(train),
          std::make_unique<SyntheticTokenDataset>(test)};
}

}  // namespace ringtrain::data
