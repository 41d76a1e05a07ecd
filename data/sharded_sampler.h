// ShardedSampler: which samples each rank trains on, batch by batch, epoch after epoch.
//
// Layout (that of PyTorch's DistributedSampler). Every epoch all ranks draw the same permutation
// of the N samples from (seed, epoch). With R ranks each rank keeps floor(N / R) samples: rank r
// takes positions r, r + R, r + 2R, ... of the permutation. The N mod R positions at the end are
// skipped that epoch; since the permutation changes, so do the skipped samples, and over epochs
// every sample is used. A rank cuts its share into batches of B in order; the last batch is
// smaller (the same size on every rank) or, with dropLast, left out.
//
// Why every rank gets the same number of steps: each step ends in an all-reduce that waits for
// every rank. A rank with one batch more than another would wait for it forever; padding, as
// DistributedSampler does by repeating samples, would count some samples twice. Truncating to
// floor(N / R) costs at most R - 1 samples an epoch.
//
// Exact data parallelism. At step s the R ranks together train on permutation positions
// [s·R·B, (s+1)·R·B) -- rank r on those congruent to r mod R -- and one rank with batch R·B on
// the same positions. So R ranks with batch B see, at every step, exactly the samples (as a set)
// one rank with batch R·B sees, and averaged gradients equal the big batch's: the trainer's
// exact-data-parallelism test relies on this. It holds for every step when dropLast is set or R
// divides N. Otherwise it holds for every step but the last: the single rank also trains on the
// N mod R samples the R ranks skip, in its last batch or in one extra step, so such a test should
// pick N divisible by R.
//
// Resume. The position (epoch, step) of the next batch is all the state there is: a sampler
// constructed at a saved position yields the same batches as one that iterated there.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ringtrain::data {

struct SamplerOptions {
  std::int64_t datasetSize = 0;
  int rank = 0;
  int worldSize = 1;
  std::int64_t batchSize = 1;  // per rank
  bool dropLast = false;       // leave out each epoch's last, smaller batch
  bool shuffle = true;         // false: the identity permutation every epoch
  std::uint64_t seed = 0;      // must be the same on every rank
};

struct SamplerPosition {
  std::int64_t epoch = 0;
  std::int64_t step = 0;  // within the epoch
  bool operator==(const SamplerPosition&) const = default;
};

class ShardedSampler {
 public:
  // Throws DataError (one line) when the sizes leave a rank nothing to do -- fewer samples than
  // ranks, or dropLast with fewer samples per rank than a batch -- and std::invalid_argument for
  // a rank outside [0, worldSize), non-positive sizes or a position outside the epoch
  // (step == stepsPerEpoch() is accepted as the start of the next epoch).
  explicit ShardedSampler(const SamplerOptions& options, SamplerPosition start = {});

  // floor(N / worldSize): a rank's share of each epoch (with dropLast, less the dropped batch).
  std::int64_t samplesPerRank() const { return samplesPerRank_; }
  // The same on every rank, and at least 1.
  std::int64_t stepsPerEpoch() const { return stepsPerEpoch_; }
  // The size of batch `step` of an epoch: batchSize except perhaps the last; the same on every
  // rank.
  std::int64_t batchSizeAt(std::int64_t step) const;

  // The position of the batch next() returns.
  SamplerPosition position() const { return position_; }

  // This rank's sample indices for the batch at position(), then moves on (to step 0 of the next
  // epoch after the last step). The span stays valid until the next call.
  std::span<const std::int64_t> next();
  // The indices next() will return, without moving on, when they lie in the epoch already drawn;
  // empty at the start of an epoch, whose permutation only next() draws. Valid until next().
  std::span<const std::int64_t> peek() const;

 private:
  void startEpoch(std::int64_t epoch);

  SamplerOptions options_;
  std::int64_t samplesPerRank_ = 0;
  std::int64_t stepsPerEpoch_ = 0;
  SamplerPosition position_;
  std::int64_t shardEpoch_ = -1;     // the epoch shard_ belongs to
  std::vector<std::int64_t> shard_;  // this rank's positions of that epoch's permutation
};

// The permutation of [0, n) for (seed, epoch): Fisher-Yates driven by SplitMix64, so the same on
// every rank, compiler and standard library.
std::vector<std::int64_t> epochPermutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

// A split of [0, n) into worldSize contiguous ranges whose sizes differ by at most one, covering
// every index: for evaluation, where every sample must be counted once and the ranks combine
// their counts with one all-reduce at the end, so unequal step counts do no harm.
struct IndexRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};
IndexRange contiguousShard(std::int64_t n, int rank, int worldSize);

}  // namespace ringtrain::data
