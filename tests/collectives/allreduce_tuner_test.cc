// AllreduceTuner, with a scripted timer (the same on every rank), so that the test judges the
// search and not the machine: in place decides; the median of the rounds counts; the last size's
// choice stays while within the margin; recursive doubling is not timed above its limit; adjacent
// sizes with one choice become one rule and the last rule holds every larger size.
#include "collectives/allreduce_tuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "collectives/tuned_communicator.h"

namespace ringtrain::testing {
namespace {

using collectives::AllreduceAlgorithm;
using collectives::AllreduceTuner;
using collectives::TunedSize;
constexpr auto kRd = AllreduceAlgorithm::kRecursiveDoubling;
constexpr auto kRing = AllreduceAlgorithm::kRing;
constexpr auto kCached = AllreduceAlgorithm::kRingCached;
constexpr auto kMpi = AllreduceAlgorithm::kMpi;

// In-place microseconds per call by size and algorithm; out of place takes a tenth of mpi's (so
// that only in place can explain a choice).
const std::map<std::size_t, std::map<AllreduceAlgorithm, double>> kInPlaceUs = {
    {1024, {{kRd, 1}, {kRing, 5}, {kCached, 5}, {kMpi, 2}}},
    // mpi is faster, but within 5% of recursive doubling, which was the last size's choice.
    {65536, {{kRd, 10}, {kRing, 20}, {kCached, 20}, {kMpi, 9.8}}},
    {std::size_t{1} << 20, {{kRd, 100}, {kRing, 40}, {kCached, 41}, {kMpi, 50}}},
    // Above recursive doubling's limit; ring-cached within the margin of the ring.
    {std::size_t{8} << 20, {{kRd, 1}, {kRing, 300}, {kCached, 290}, {kMpi, 400}}},
};

TEST(AllreduceTuner, ChoosesInPlaceByMedianWithTheMarginAndMergesTheRules) {
  const auto layout = collectives::rankLayoutOf(MPI_COMM_WORLD, 0);
  if (!layout.oneNode()) GTEST_SKIP() << "the script has no times for the hierarchical algorithm";
  AllreduceTuner tuner(MPI_COMM_WORLD, {}, layout, {.rounds = 3, .margin = 0.05});
  ASSERT_EQ(tuner.algorithms(), (std::vector<AllreduceAlgorithm>{kRd, kRing, kCached, kMpi}));
  std::map<std::pair<std::size_t, AllreduceAlgorithm>, int> calls;
  for (const auto& [bytes, times] : kInPlaceUs) {
    const auto time = [&, bytes = bytes, &times = times](collectives::Communicator& comm,
                                                         bool inPlace) {
      const auto algorithm =
          dynamic_cast<const collectives::TunedCommunicator&>(comm).table().choose(bytes);
      // The second round of every candidate is a spike that the median ignores.
      const bool spike = calls[{bytes, algorithm}]++ / 2 == 1;
      const double us = inPlace ? times.at(algorithm) : times.at(kMpi) / 10;
      return spike ? us * 1000 : us;
    };
    const TunedSize tuned = tuner.tuneSize(bytes, time);
    EXPECT_EQ(tuned.bytes, bytes);
    ASSERT_EQ(tuned.inPlaceUs.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) {
      const AllreduceAlgorithm algorithm = tuner.algorithms()[i];
      if (algorithm == kRd && bytes > collectives::kMaxRecursiveDoublingBytes) {
        EXPECT_TRUE(std::isinf(tuned.inPlaceUs[i])) << bytes;
        EXPECT_EQ(calls.count({bytes, kRd}), 0u) << "recursive doubling timed at " << bytes;
        continue;
      }
      EXPECT_EQ(tuned.inPlaceUs[i], times.at(algorithm)) << bytes << " " << name(algorithm);
      EXPECT_EQ(tuned.outOfPlaceUs[i], times.at(kMpi) / 10) << bytes << " " << name(algorithm);
      EXPECT_EQ((calls[{bytes, algorithm}]), 6) << "3 rounds, out of place and in place";
    }
  }
  const std::vector<collectives::TuningRule> expected = {{65536, kRd},
                                                         {collectives::kUnboundedBytes, kRing}};
  const collectives::TuningTable table = tuner.table();
  EXPECT_EQ(table.rules, expected) << summary(table);
  EXPECT_EQ(table.layout, layout);
  EXPECT_EQ(table.cpu, collectives::cpuModel());
}

}  // namespace
}  // namespace ringtrain::testing
