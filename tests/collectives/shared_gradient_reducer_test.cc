// SharedGradientReducer under mpirun: every rank's averages equal (g_0 + ... + g_{n-1}) / n summed
// in rank order, to the bit, for several steps; overlap on and off, coarse and fine
// announcements, give the same bits; buckets are handed over in order; the ranks must share a
// node; gradients outside gradientStorage() are refused.
#include "collectives/shared_gradient_reducer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include <mpi.h>

#include "collectives/mpi_check.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::GradientBucket;
using collectives::GradientSegment;
using collectives::SharedGradientReducer;
using collectives::SharedReducerOptions;

// An MLP-like layout in forward order, with sizes that are no multiple of a piece or a line.
std::vector<GradientSegment> segments() {
  return {{"fc1.weight", 0, 40000}, {"fc1.bias", 40000, 100},   {"fc2.weight", 40100, 9000},
          {"fc2.bias", 49100, 90},  {"fc3.weight", 49190, 905}, {"fc3.bias", 50095, 5}};
}
constexpr std::size_t kCount = 50100;

// From an integer, with one multiplication: no expression the compiler could contract into a
// fused multiply-add one way here and another way there, so every rank and the reference compute
// the same bits.
float gradientValue(int rank, std::size_t i, int step) {
  const std::size_t k = (i * 7919 + static_cast<std::size_t>(rank) * 104729 +
                         static_cast<std::size_t>(step) * 31) %
                        100003;
  return std::sin(static_cast<float>(k) * 1e-4f);
}

// What every rank must get: the ranks' gradients summed in rank order, then divided once.
std::vector<float> expectedAverage(int ranks, int step) {
  std::vector<float> sum(kCount);
  for (std::size_t i = 0; i < kCount; ++i) {
    float s = gradientValue(0, i, step);
    for (int r = 1; r < ranks; ++r)
      s += gradientValue(r, i, step);
    sum[i] = s / static_cast<float>(ranks);
  }
  return sum;
}

enum class Announce { kPerLayer, kInParts };

struct StepResults {
  std::vector<std::vector<float>> averages;  // per step
  std::vector<int> callbackOrder;            // bucket indices, every step
};

// Steps like backward: layers from the last to the first, each written then announced (in parts
// of 1000 elements from its end with kInParts), with a little work in between so that ranks
// really average while others still compute.
StepResults runSteps(const SharedReducerOptions& options, Announce announce, int steps) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), options);
  int rank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  const std::span<float> gradients = reducer.gradientStorage();
  StepResults run;
  for (int step = 0; step < steps; ++step) {
    reducer.beginStep(gradients, reducer.averagedStorage());
    const auto all = segments();
    for (int s = static_cast<int>(all.size()) - 1; s >= 0; --s) {
      const GradientSegment& seg = all[static_cast<std::size_t>(s)];
      for (std::size_t end = seg.offset + seg.count; end > seg.offset;) {
        const std::size_t begin =
            announce == Announce::kInParts && end - seg.offset > 1000 ? end - 1000 : seg.offset;
        for (std::size_t i = begin; i < end; ++i)
          gradients[i] = gradientValue(rank, i, step);
        if (begin > seg.offset) reducer.gradientsFinalFrom(begin);
        end = begin;
      }
      reducer.segmentReady(s);
      std::this_thread::sleep_for(std::chrono::microseconds(100 * (rank + 1)));
    }
    reducer.finishStep([&](const GradientBucket& b) { run.callbackOrder.push_back(b.index); });
    const std::span<float> averaged = reducer.averagedStorage();
    run.averages.emplace_back(averaged.begin(), averaged.end());
  }
  return run;
}

std::size_t differingBits(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

SharedReducerOptions smallPieces(bool overlap) {
  SharedReducerOptions options;
  options.fusionThresholdBytes = 16 << 10;  // several buckets
  options.pieceBytes = 4096;                // many pieces, shared out among the ranks
  options.overlap = overlap;
  options.stallTimeoutSeconds = 120;
  return options;
}

TEST(SharedGradientReducerTest, AveragesEqualTheRankOrderSumOnEveryRankForEveryStep) {
  const int ranks = mpiEnvironment().worldSize();
  const StepResults run = runSteps(smallPieces(true), Announce::kInParts, 4);
  for (int step = 0; step < 4; ++step) {
    EXPECT_EQ(
        differingBits(run.averages[static_cast<std::size_t>(step)], expectedAverage(ranks, step)),
        0u)
        << "averages differing from (g_0 + ... + g_" << ranks - 1 << ") / " << ranks << " in step "
        << step << " on rank " << mpiEnvironment().worldRank();
  }
}

TEST(SharedGradientReducerTest, HandsBucketsOverInOrderEveryStep) {
  const StepResults run = runSteps(smallPieces(true), Announce::kPerLayer, 3);
  SharedGradientReducer plan(MPI_COMM_WORLD, segments(), smallPieces(true));
  const std::size_t buckets = plan.buckets().size();
  ASSERT_GE(buckets, 3u) << "the test needs several buckets";
  ASSERT_EQ(run.callbackOrder.size(), 3 * buckets);
  for (std::size_t i = 0; i < run.callbackOrder.size(); ++i)
    EXPECT_EQ(run.callbackOrder[i], static_cast<int>(i % buckets));
}

TEST(SharedGradientReducerTest, OverlapOffAndCoarseAnnouncementsGiveTheSameBits) {
  const StepResults fine = runSteps(smallPieces(true), Announce::kInParts, 3);
  const StepResults coarse = runSteps(smallPieces(true), Announce::kPerLayer, 3);
  const StepResults sequential = runSteps(smallPieces(false), Announce::kInParts, 3);
  for (std::size_t step = 0; step < 3; ++step) {
    EXPECT_EQ(differingBits(fine.averages[step], coarse.averages[step]), 0u) << "step " << step;
    EXPECT_EQ(differingBits(fine.averages[step], sequential.averages[step]), 0u) << "step " << step;
  }
}

TEST(SharedGradientReducerTest, OnePieceForTheWholeBufferWorksToo) {
  SharedReducerOptions options = smallPieces(true);
  options.pieceBytes = 1 << 20;
  const StepResults run = runSteps(options, Announce::kPerLayer, 2);
  EXPECT_EQ(differingBits(run.averages[1], expectedAverage(mpiEnvironment().worldSize(), 1)), 0u);
}

TEST(SharedGradientReducerTest, RefusesGradientsKeptElsewhere) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), smallPieces(true));
  std::vector<float> own(kCount);
  EXPECT_THROW(reducer.beginStep(own, reducer.averagedStorage()), std::logic_error);
}

// A communicator of one rank: the average is the rank's own gradients.
TEST(SharedGradientReducerTest, OneRankAloneAveragesToItsOwnGradients) {
  SharedGradientReducer reducer(MPI_COMM_SELF, segments(), smallPieces(true));
  reducer.beginStep(reducer.gradientStorage(), reducer.averagedStorage());
  for (std::size_t i = 0; i < kCount; ++i)
    reducer.gradientStorage()[i] = gradientValue(5, i, 0);
  for (int s = static_cast<int>(segments().size()) - 1; s >= 0; --s)
    reducer.segmentReady(s);
  reducer.finishStep([](const GradientBucket&) {});
  const std::span<float> averaged = reducer.averagedStorage();
  for (std::size_t i = 0; i < kCount; i += 997)
    EXPECT_EQ(averaged[i], gradientValue(5, i, 0)) << i;
}

}  // namespace
}  // namespace ringtrain::testing
