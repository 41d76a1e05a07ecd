// ShardedSampler over many (N, ranks, batch, dropLast) combinations: disjoint shards, the same
// steps and batch sizes on every rank, exact data parallelism against one rank with the combined
// batch, determinism, fresh permutations each epoch, and resume from a saved position.
#include "data/sharded_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/data_error.h"
#include "data/random.h"
#include "tests/data/data_test_support.h"

namespace ringtrain::data {
namespace {

using Batch = std::vector<std::int64_t>;
using Set = std::set<std::int64_t>;

constexpr std::uint64_t kSeed = 1234;
constexpr int kEpochs = 3;

SamplerOptions options(std::int64_t n, int rank, int ranks, std::int64_t batch, bool dropLast) {
  return SamplerOptions{n, rank, ranks, batch, dropLast, true, kSeed};
}

bool buildable(std::int64_t n, int ranks, std::int64_t batch, bool dropLast) {
  return n >= ranks && (!dropLast || n / ranks >= batch);
}

// The batches of `epochs` epochs from a fresh sampler.
std::vector<Batch> run(const SamplerOptions& o, int epochs, SamplerPosition start = {}) {
  ShardedSampler sampler(o, start);
  std::vector<Batch> batches;
  const std::int64_t steps = epochs * sampler.stepsPerEpoch() - start.step;
  for (std::int64_t s = 0; s < steps; ++s) {
    const auto batch = sampler.next();
    batches.emplace_back(batch.begin(), batch.end());
  }
  return batches;
}

struct Combination {
  std::int64_t n;
  int ranks;
  std::int64_t batch;
  bool dropLast;
  std::string label() const {
    return "N=" + std::to_string(n) + " ranks=" + std::to_string(ranks) +
           " B=" + std::to_string(batch) + (dropLast ? " dropLast" : "");
  }
};

std::vector<Combination> combinations() {
  std::vector<Combination> out;
  for (std::int64_t n : {1, 2, 3, 5, 7, 10, 12, 16, 17, 64, 100, 101, 1000}) {
    for (int ranks : {1, 2, 3, 4, 5, 8}) {
      for (std::int64_t batch : {1, 2, 3, 7, 32}) {
        for (bool dropLast : {false, true}) {
          if (buildable(n, ranks, batch, dropLast)) out.push_back({n, ranks, batch, dropLast});
        }
      }
    }
  }
  return out;
}

TEST(ShardedSamplerTest, EveryRankTakesTheSameStepsWithTheSameBatchSizesOnDisjointShards) {
  for (const Combination& c : combinations()) {
    SCOPED_TRACE(c.label());
    const std::int64_t perRank = c.n / c.ranks;
    const std::int64_t steps = c.dropLast ? perRank / c.batch : (perRank + c.batch - 1) / c.batch;
    std::vector<std::vector<Batch>> byRank;
    for (int r = 0; r < c.ranks; ++r) {
      ShardedSampler sampler(options(c.n, r, c.ranks, c.batch, c.dropLast));
      EXPECT_EQ(sampler.samplesPerRank(), perRank);
      ASSERT_EQ(sampler.stepsPerEpoch(), steps);
      byRank.push_back(run(options(c.n, r, c.ranks, c.batch, c.dropLast), kEpochs));
    }
    for (int e = 0; e < kEpochs; ++e) {
      const std::vector<std::int64_t> permutation = epochPermutation(c.n, kSeed, e);
      Set seen;
      std::int64_t trained = 0;
      for (std::int64_t s = 0; s < steps; ++s) {
        const auto step = static_cast<std::size_t>(e * steps + s);
        const std::size_t size = byRank[0][step].size();
        EXPECT_EQ(static_cast<std::int64_t>(size),
                  ShardedSampler(options(c.n, 0, c.ranks, c.batch, c.dropLast)).batchSizeAt(s));
        EXPECT_TRUE(size == static_cast<std::size_t>(c.batch) || s == steps - 1);
        for (int r = 0; r < c.ranks; ++r) {
          ASSERT_EQ(byRank[r][step].size(), size) << "rank " << r << " step " << s;
          for (const std::int64_t i : byRank[r][step]) {
            EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " twice in epoch " << e;
            ++trained;
          }
        }
      }
      // Exactly the first R x (samples trained per rank) positions of the epoch's permutation.
      EXPECT_EQ(trained, c.ranks * (c.dropLast ? steps * c.batch : perRank));
      EXPECT_EQ(seen, Set(permutation.begin(), permutation.begin() + trained));
    }
  }
}

TEST(ShardedSamplerTest, RanksWithBatchBSeeAtEveryStepWhatOneRankWithBatchRTimesBSees) {
  for (const Combination& c : combinations()) {
    if (c.ranks == 1) continue;
    SCOPED_TRACE(c.label());
    const auto reference = run(options(c.n, 0, 1, c.ranks * c.batch, c.dropLast), kEpochs);
    const std::int64_t referenceSteps =
        ShardedSampler(options(c.n, 0, 1, c.ranks * c.batch, c.dropLast)).stepsPerEpoch();
    std::vector<std::vector<Batch>> byRank;
    for (int r = 0; r < c.ranks; ++r) {
      byRank.push_back(run(options(c.n, r, c.ranks, c.batch, c.dropLast), kEpochs));
    }
    const auto steps = static_cast<std::int64_t>(byRank[0].size()) / kEpochs;
    // The exact statement (see sharded_sampler.h): every step, when dropLast or R divides N;
    // otherwise every step but the last, where the single rank also has the skipped remainder.
    const bool exact = c.dropLast || c.n % c.ranks == 0;
    if (exact) {
      EXPECT_EQ(steps, referenceSteps);
    }
    for (int e = 0; e < kEpochs; ++e) {
      for (std::int64_t s = 0; s < steps; ++s) {
        Set together;
        for (int r = 0; r < c.ranks; ++r) {
          const Batch& b = byRank[r][static_cast<std::size_t>(e * steps + s)];
          together.insert(b.begin(), b.end());
        }
        const Batch& big = reference[static_cast<std::size_t>(e * referenceSteps + s)];
        const Set bigSet(big.begin(), big.end());
        if (exact || s < steps - 1) {
          EXPECT_EQ(together, bigSet) << "epoch " << e << " step " << s;
        } else {
          EXPECT_TRUE(std::includes(bigSet.begin(), bigSet.end(), together.begin(), together.end()))
              << "epoch " << e << " last step";
        }
      }
    }
  }
}

TEST(ShardedSamplerTest, SameOptionsGiveTheSameBatchesAndEpochsDiffer) {
  for (const Combination& c : combinations()) {
    SCOPED_TRACE(c.label());
    const int rank = c.ranks - 1;
    const auto first = run(options(c.n, rank, c.ranks, c.batch, c.dropLast), kEpochs);
    EXPECT_EQ(first, run(options(c.n, rank, c.ranks, c.batch, c.dropLast), kEpochs));
    if (c.n < 10) continue;  // few samples: two epochs may well draw the same order
    // All ranks' batches of an epoch, in order: what the epoch's permutation decided.
    std::vector<Batch> epochs(kEpochs);
    for (int r = 0; r < c.ranks; ++r) {
      const auto batches = run(options(c.n, r, c.ranks, c.batch, c.dropLast), kEpochs);
      const std::size_t steps = batches.size() / kEpochs;
      for (std::size_t k = 0; k < batches.size(); ++k) {
        epochs[k / steps].insert(epochs[k / steps].end(), batches[k].begin(), batches[k].end());
      }
    }
    EXPECT_NE(epochs[0], epochs[1]);
    EXPECT_NE(epochs[1], epochs[2]);
  }
}

TEST(ShardedSamplerTest, SamplerBuiltAtASavedPositionContinuesLikeOneThatIteratedThere) {
  for (const Combination& c : combinations()) {
    SCOPED_TRACE(c.label());
    const SamplerOptions o = options(c.n, c.ranks / 2, c.ranks, c.batch, c.dropLast);
    const auto all = run(o, kEpochs + 1);
    ShardedSampler iterating(o);
    const std::int64_t steps = iterating.stepsPerEpoch();
    for (std::int64_t e = 0; e < kEpochs; ++e) {
      for (std::int64_t s = 0; s < steps; ++s) {
        const SamplerPosition position{e, s};
        ASSERT_EQ(iterating.position(), position);
        iterating.next();
        ShardedSampler resumed(o, position);
        EXPECT_EQ(resumed.position(), position);
        // The rest of this epoch and all of the next.
        for (std::int64_t k = e * steps + s; k < (e + 2) * steps; ++k) {
          const auto batch = resumed.next();
          ASSERT_EQ(Batch(batch.begin(), batch.end()), all[static_cast<std::size_t>(k)])
              << "resumed at epoch " << e << " step " << s << ", batch " << k;
        }
      }
    }
  }
}

TEST(ShardedSamplerTest, StepEqualToStepsPerEpochIsTheNextEpochsStart) {
  const SamplerOptions o = options(100, 1, 3, 7, false);
  ShardedSampler atEnd(o, SamplerPosition{2, ShardedSampler(o).stepsPerEpoch()});
  EXPECT_EQ(atEnd.position(), (SamplerPosition{3, 0}));
  ShardedSampler atStart(o, SamplerPosition{3, 0});
  const auto a = atEnd.next();
  const Batch first(a.begin(), a.end());
  const auto b = atStart.next();
  EXPECT_EQ(first, Batch(b.begin(), b.end()));
}

// peek() is what next() returns next, inside an epoch already drawn, and moves nothing; at the
// start of an epoch (the first one included) it is empty.
TEST(ShardedSamplerTest, PeekShowsTheNextBatchWithoutMovingAndNothingAtAnEpochsStart) {
  for (const bool dropLast : {false, true}) {
    const SamplerOptions o = options(100, 1, 3, 7, dropLast);
    ShardedSampler sampler(o);
    EXPECT_TRUE(sampler.peek().empty()) << "before the first epoch is drawn";
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      for (std::int64_t step = 0; step < sampler.stepsPerEpoch(); ++step) {
        const SamplerPosition at = sampler.position();
        const auto peeked = sampler.peek();
        const Batch seen(peeked.begin(), peeked.end());
        EXPECT_EQ(sampler.position(), at) << "peek moved the sampler";
        const auto taken = sampler.next();
        if (step == 0) {
          EXPECT_TRUE(seen.empty()) << "epoch " << epoch << " is drawn by next(), not peek()";
        } else {
          EXPECT_EQ(seen, Batch(taken.begin(), taken.end()))
              << "epoch " << epoch << " step " << step << " dropLast " << dropLast;
        }
      }
    }
  }
}

TEST(ShardedSamplerTest, WithoutShuffleRankRTakesRThenRPlusSize) {
  SamplerOptions o = options(11, 1, 3, 2, false);
  o.shuffle = false;
  ShardedSampler sampler(o);
  ASSERT_EQ(sampler.stepsPerEpoch(), 2);  // floor(11 / 3) = 3 samples: batches of 2 and 1
  auto batch = sampler.next();
  EXPECT_EQ(Batch(batch.begin(), batch.end()), (Batch{1, 4}));
  batch = sampler.next();
  EXPECT_EQ(Batch(batch.begin(), batch.end()), (Batch{7}));
  batch = sampler.next();  // epoch 1: the same order, sample 10 skipped again
  EXPECT_EQ(Batch(batch.begin(), batch.end()), (Batch{1, 4}));
}

TEST(ShardedSamplerTest, SizesThatLeaveARankNothingAreOneLineErrors) {
  EXPECT_EQ(testing::dataErrorOf([] { ShardedSampler(options(3, 0, 4, 1, false)); }),
            "a dataset of 3 samples cannot be shared by 4 ranks: every rank needs at least one "
            "sample per epoch");
  EXPECT_EQ(testing::dataErrorOf([] { ShardedSampler(options(100, 0, 4, 32, true)); }),
            "batch size 32 with drop-last leaves no batch: each of the 4 ranks has only 25 "
            "samples per epoch");
  EXPECT_EQ(ShardedSampler(options(100, 0, 4, 32, false)).stepsPerEpoch(), 1);
  EXPECT_THROW(ShardedSampler(options(100, 4, 4, 1, false)), std::invalid_argument);
  EXPECT_THROW(ShardedSampler(options(100, -1, 4, 1, false)), std::invalid_argument);
  EXPECT_THROW(ShardedSampler(options(100, 0, 4, 0, false)), std::invalid_argument);
  EXPECT_THROW(ShardedSampler(options(100, 0, 4, 5, false), SamplerPosition{0, 6}),
               std::invalid_argument);
  EXPECT_THROW(ShardedSampler(options(100, 0, 4, 5, false), SamplerPosition{-1, 0}),
               std::invalid_argument);
}

// The permutation depends on this code only; pinned values catch any change to the generator,
// which would silently change every run's batches and invalidate saved positions.
TEST(SeededRandomnessTest, SplitMix64AndThePermutationArePinned) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafULL);  // SplitMix64's published first output for 0
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(epochPermutation(10, 42, 0), (std::vector<std::int64_t>{8, 2, 1, 5, 0, 9, 4, 6, 3, 7}));
}

TEST(SeededRandomnessTest, BelowIsUniformEnough) {
  SplitMix64 rng(7);
  std::vector<int> counts(6);
  for (int i = 0; i < 60000; ++i)
    ++counts[static_cast<std::size_t>(rng.below(6))];
  for (const int count : counts)
    EXPECT_NEAR(count, 10000, 400);
}

TEST(ContiguousShardTest, CoversEveryIndexOnceWithSizesDifferingByAtMostOne) {
  for (std::int64_t n : {0, 1, 5, 10, 11, 1000}) {
    for (int ranks : {1, 2, 3, 7}) {
      std::int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const IndexRange range = contiguousShard(n, r, ranks);
        EXPECT_EQ(range.begin, next);
        EXPECT_TRUE(range.end - range.begin == n / ranks ||
                    range.end - range.begin == n / ranks + 1);
        next = range.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

}  // namespace
}  // namespace ringtrain::data
