#include "data/sharded_sampler.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "data/data_error.h"
#include "data/random.h"

namespace ringtrain::data {

std::vector<std::int64_t> epochPermutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  // Epochs get unrelated streams (hash64 is a bijection of the epoch for a fixed seed).
  SplitMix64 rng(hash64(seed, static_cast<std::uint64_t>(epoch)));
  return shuffledIndices(n, rng);
}

IndexRange contiguousShard(std::int64_t n, int rank, int worldSize) {
  if (n < 0 || worldSize < 1 || rank < 0 || rank >= worldSize) {
    throw std::invalid_argument("contiguousShard: rank " + std::to_string(rank) + " of " +
                                std::to_string(worldSize) + ", n " + std::to_string(n));
  }
  // The first n mod worldSize ranks take one extra index.
  const std::int64_t base = n / worldSize;
  const std::int64_t extra = n % worldSize;
  const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
  return IndexRange{begin, begin + base + (rank < extra ? 1 : 0)};
}

ShardedSampler::ShardedSampler(const SamplerOptions& options, SamplerPosition start)
    : options_(options) {
  if (options.worldSize < 1 || options.rank < 0 || options.rank >= options.worldSize) {
    throw std::invalid_argument("ShardedSampler: rank " + std::to_string(options.rank) +
                                " outside [0, " + std::to_string(options.worldSize) + ")");
  }
  if (options.batchSize < 1) {
    throw std::invalid_argument("ShardedSampler: batch size " + std::to_string(options.batchSize) +
                                " is below 1");
  }
  if (options.datasetSize < options.worldSize) {
    throw DataError("a dataset of " + std::to_string(options.datasetSize) +
                    " samples cannot be shared by " + std::to_string(options.worldSize) +
                    " ranks: every rank needs at least one sample per epoch");
  }
  samplesPerRank_ = options.datasetSize / options.worldSize;
  stepsPerEpoch_ = options.dropLast ? samplesPerRank_ / options.batchSize
                                    : (samplesPerRank_ + options.batchSize - 1) / options.batchSize;
  if (stepsPerEpoch_ == 0) {
    throw DataError("batch size " + std::to_string(options.batchSize) +
                    " with drop-last leaves no batch: each of the " +
                    std::to_string(options.worldSize) + " ranks has only " +
                    std::to_string(samplesPerRank_) + " samples per epoch");
  }
  if (start.epoch < 0 || start.step < 0 || start.step > stepsPerEpoch_) {
    throw std::invalid_argument("ShardedSampler: position (epoch " + std::to_string(start.epoch) +
                                ", step " + std::to_string(start.step) + ") outside an epoch of " +
                                std::to_string(stepsPerEpoch_) + " steps");
  }
  if (start.step == stepsPerEpoch_) start = SamplerPosition{start.epoch + 1, 0};
  position_ = start;
}

std::int64_t ShardedSampler::batchSizeAt(std::int64_t step) const {
  if (step < 0 || step >= stepsPerEpoch_) {
    throw std::out_of_range("ShardedSampler::batchSizeAt: step " + std::to_string(step) +
                            " outside [0, " + std::to_string(stepsPerEpoch_) + ")");
  }
  return std::min(options_.batchSize, samplesPerRank_ - step * options_.batchSize);
}

void ShardedSampler::startEpoch(std::int64_t epoch) {
  // Every rank computes the whole permutation (O(N) per epoch, 60000 indices for MNIST) and keeps
  // its strided share; what would need communication is thereby replaced by agreement on the seed.
  std::vector<std::int64_t> permutation;
  if (options_.shuffle) {
    permutation = epochPermutation(options_.datasetSize, options_.seed, epoch);
  } else {
    permutation.resize(static_cast<std::size_t>(options_.datasetSize));
    std::iota(permutation.begin(), permutation.end(), std::int64_t{0});
  }
  shard_.resize(static_cast<std::size_t>(samplesPerRank_));
  for (std::int64_t k = 0; k < samplesPerRank_; ++k) {
    shard_[static_cast<std::size_t>(k)] =
        permutation[static_cast<std::size_t>(options_.rank + k * options_.worldSize)];
  }
  shardEpoch_ = epoch;
}

std::span<const std::int64_t> ShardedSampler::next() {
  if (shardEpoch_ != position_.epoch) startEpoch(position_.epoch);
  const std::int64_t size = batchSizeAt(position_.step);
  const std::span<const std::int64_t> batch(shard_.data() + position_.step * options_.batchSize,
                                            static_cast<std::size_t>(size));
  if (++position_.step == stepsPerEpoch_) position_ = SamplerPosition{position_.epoch + 1, 0};
  return batch;
}

std::span<const std::int64_t> ShardedSampler::peek() const {
  if (shardEpoch_ != position_.epoch) return {};
  return {shard_.data() + position_.step * options_.batchSize,
          static_cast<std::size_t>(batchSizeAt(position_.step))};
}

}  // namespace ringtrain::data
