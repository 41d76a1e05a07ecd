// SharedGradientReducer under mpirun: every rank's averages equal (g_0 + ... + g_{n-1}) / n summed
// in rank order, to the bit, for several steps; overlap on and off, coarse and fine
// announcements, give the same bits; every element is handed over once, in bucket order, after its
// average is final; with shared parameters each element is handed over on one rank and its update
// is seen by all; the ranks must share a node; gradients outside gradientStorage() are refused.
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
  const std::size_t k =
      (i * 7919 + static_cast<std::size_t>(rank) * 104729 + static_cast<std::size_t>(step) * 31) %
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

// One onAveraged call: which bucket, and the range it handed over.
struct HandedOver {
  int bucket = 0;
  std::size_t offset = 0;
  std::size_t count = 0;
};

struct StepResults {
  std::vector<std::vector<float>> averages;     // per step
  std::vector<std::vector<HandedOver>> handed;  // per step, in call order
  std::size_t handedBeforeAveraged = 0;  // elements whose average was not final when handed over
};

// One step's backward: layers from the last to the first, each written then announced (in parts
// of 1000 elements from its end with kInParts), with a little work in between so that ranks
// really average while others still compute.
void writeAndAnnounce(SharedGradientReducer& reducer, int rank, int step, Announce announce) {
  const std::span<float> gradients = reducer.gradientStorage();
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
}

StepResults runSteps(const SharedReducerOptions& options, Announce announce, int steps) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), options);
  int rank = 0;
  int ranks = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  const std::span<float> gradients = reducer.gradientStorage();
  StepResults run;
  for (int step = 0; step < steps; ++step) {
    reducer.beginStep(gradients, reducer.averagedStorage());
    writeAndAnnounce(reducer, rank, step, announce);
    const std::vector<float> expected = expectedAverage(ranks, step);
    const std::span<const float> averaging = reducer.averagedStorage();
    run.handed.emplace_back();
    reducer.finishStep([&](const GradientBucket& b) {
      run.handed.back().push_back({b.index, b.offset, b.count});
      for (std::size_t i = b.offset; i < b.offset + b.count; ++i)
        run.handedBeforeAveraged += std::memcmp(&averaging[i], &expected[i], sizeof(float)) != 0;
    });
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

// smallPieces, with one copy of the parameters and of a state array for the node.
SharedReducerOptions withSharedCopy() {
  SharedReducerOptions options = smallPieces(true);
  options.shareParameters = true;
  options.stateSize = kCount;
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

// onAveraged gets the buffer from its end to its start, in bucket order, each element once and
// only once its average is final; a call stays within its bucket (it may be a part of it: a rank
// hands over what is averaged while other parts are still being averaged).
TEST(SharedGradientReducerTest, HandsEveryElementOverOnceInBucketOrderAfterItsAverage) {
  for (const bool overlap : {true, false}) {
    const StepResults run = runSteps(smallPieces(overlap), Announce::kInParts, 3);
    SharedGradientReducer plan(MPI_COMM_WORLD, segments(), smallPieces(overlap));
    const auto buckets = plan.buckets();
    ASSERT_GE(buckets.size(), 3u) << "the test needs several buckets";
    EXPECT_EQ(run.handedBeforeAveraged, 0u)
        << "elements handed over before their average was final, overlap " << overlap;
    for (std::size_t step = 0; step < run.handed.size(); ++step) {
      const std::vector<HandedOver>& calls = run.handed[step];
      ASSERT_FALSE(calls.empty()) << "step " << step;
      std::size_t end = kCount;  // the next call must end where the last one began
      int bucket = 0;
      for (const HandedOver& call : calls) {
        ASSERT_GE(call.bucket, bucket) << "buckets out of order in step " << step;
        ASSERT_LT(static_cast<std::size_t>(call.bucket), buckets.size());
        const auto& b = buckets[static_cast<std::size_t>(call.bucket)];
        EXPECT_GT(call.count, 0u);
        EXPECT_EQ(call.offset + call.count, end) << "a gap or an overlap in step " << step;
        EXPECT_GE(call.offset, b.offset) << "outside bucket " << call.bucket;
        EXPECT_LE(call.offset + call.count, b.offset + b.count) << "outside bucket " << call.bucket;
        bucket = call.bucket;
        end = call.offset;
      }
      EXPECT_EQ(end, 0u) << "the start of the buffer was never handed over in step " << step;
      EXPECT_EQ(bucket, static_cast<int>(buckets.size()) - 1);
    }
  }
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

// With shared parameters each element is handed over on one rank only, right after its average,
// and the updates that rank makes to the node's one copy of the parameters and state are visible
// on every rank once finishStep returns. The "optimiser" here adds the average to the parameter
// and counts the updates in the state.
TEST(SharedGradientReducerTest, SharedParametersAreUpdatedOnceOnTheNodeAndSeenByEveryRank) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), withSharedCopy());
  const int rank = mpiEnvironment().worldRank();
  const int ranks = mpiEnvironment().worldSize();
  const std::span<float> parameters = reducer.sharedParameters();
  const std::span<float> state = reducer.sharedState();
  ASSERT_EQ(parameters.size(), kCount);
  ASSERT_EQ(state.size(), kCount);
  if (rank == 0) {
    std::fill(parameters.begin(), parameters.end(), 0.0f);
    std::fill(state.begin(), state.end(), 0.0f);
  }
  RINGTRAIN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  const std::span<float> gradients = reducer.gradientStorage();
  const std::span<const float> averaged = reducer.averagedStorage();
  std::vector<float> expectedParameters(kCount, 0.0f);
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> expected = expectedAverage(ranks, step);
    reducer.beginStep(gradients, reducer.averagedStorage());
    writeAndAnnounce(reducer, rank, step, Announce::kPerLayer);
    std::uint64_t handed = 0;
    std::size_t notFinal = 0;
    std::size_t outsideBucket = 0;
    const auto buckets = reducer.buckets();
    reducer.finishStep([&](const GradientBucket& b) {
      const GradientBucket& whole = buckets[static_cast<std::size_t>(b.index)];
      outsideBucket += b.offset < whole.offset || b.offset + b.count > whole.offset + whole.count;
      for (std::size_t i = b.offset; i < b.offset + b.count; ++i) {
        notFinal += std::memcmp(&averaged[i], &expected[i], sizeof(float)) != 0;
        parameters[i] += averaged[i];
        state[i] += 1.0f;
      }
      handed += b.count;
    });
    for (std::size_t i = 0; i < kCount; ++i)
      expectedParameters[i] += expected[i];
    EXPECT_EQ(notFinal, 0u) << "elements handed over before their average was final, step " << step
                            << ", rank " << rank;
    EXPECT_EQ(outsideBucket, 0u) << "a hand-over reaching outside its bucket";
    // Seen from this rank, right after finishStep: every element updated once in this step.
    std::size_t wrongCount = 0;
    std::size_t wrongParameter = 0;
    for (std::size_t i = 0; i < kCount; ++i) {
      wrongCount += state[i] != static_cast<float>(step + 1);
      wrongParameter += std::memcmp(&parameters[i], &expectedParameters[i], sizeof(float)) != 0;
    }
    EXPECT_EQ(wrongCount, 0u) << "elements not updated exactly once by step " << step + 1
                              << ", seen from rank " << rank;
    EXPECT_EQ(wrongParameter, 0u) << "parameters differing after step " << step + 1
                                  << ", seen from rank " << rank;
    std::uint64_t handedByAll = 0;
    RINGTRAIN_MPI_CHECK(
        MPI_Allreduce(&handed, &handedByAll, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    EXPECT_EQ(handedByAll, kCount) << "elements handed over on the node in step " << step;
  }
}

TEST(SharedGradientReducerTest, KeepsNoSharedParametersUnlessAskedTo) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), smallPieces(true));
  EXPECT_TRUE(reducer.sharedParameters().empty());
  EXPECT_TRUE(reducer.sharedState().empty());
  EXPECT_FALSE(reducer.parametersShared());
  EXPECT_THROW(reducer.setParametersShared(true), std::logic_error);
}

// With the shared copy kept, setParametersShared decides step by step how finishStep hands the
// averages over: each element once on the node (shared), or every element on every rank.
TEST(SharedGradientReducerTest, SwitchesBetweenOneUpdateOnTheNodeAndOneOnEveryRank) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), withSharedCopy());
  const int rank = mpiEnvironment().worldRank();
  const int ranks = mpiEnvironment().worldSize();
  EXPECT_TRUE(reducer.parametersShared()) << "shareParameters starts with the shared copy";
  const std::span<float> gradients = reducer.gradientStorage();
  const std::span<const float> averaged = reducer.averagedStorage();
  for (int step = 0; step < 6; ++step) {
    const bool shared = step % 3 != 1;  // shared, per-rank, shared, shared, per-rank, shared
    reducer.setParametersShared(shared);
    const std::vector<float> expected = expectedAverage(ranks, step);
    reducer.beginStep(gradients, reducer.averagedStorage());
    writeAndAnnounce(reducer, rank, step, Announce::kInParts);
    std::vector<int> times(kCount, 0);
    std::size_t notFinal = 0;
    reducer.finishStep([&](const GradientBucket& b) {
      for (std::size_t i = b.offset; i < b.offset + b.count; ++i) {
        ++times[i];
        notFinal += std::memcmp(&averaged[i], &expected[i], sizeof(float)) != 0;
      }
    });
    std::vector<int> onTheNode(kCount, 0);
    RINGTRAIN_MPI_CHECK(MPI_Allreduce(times.data(), onTheNode.data(), static_cast<int>(kCount),
                                      MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    const int want = shared ? 1 : ranks;
    std::size_t wrongOnTheNode = 0;
    std::size_t wrongHere = 0;
    for (std::size_t i = 0; i < kCount; ++i) {
      wrongOnTheNode += onTheNode[i] != want;
      wrongHere += !shared && times[i] != 1;
    }
    EXPECT_EQ(wrongOnTheNode, 0u) << "elements not handed over " << want << " time(s) on the node "
                                  << "in step " << step << (shared ? " (shared)" : " (per rank)");
    EXPECT_EQ(wrongHere, 0u) << "elements not handed over once on rank " << rank << ", step "
                             << step << " (per rank)";
    EXPECT_EQ(notFinal, 0u) << "elements handed over before their average was final, step " << step
                            << ", rank " << rank;
  }
}

// The probe of how fast a cache line crosses between the cores: collective, one figure for every
// rank (rank 0's), and again on the next call (the probe's line keeps counting).
TEST(SharedGradientReducerTest, MeasuresOneRoundTripFigureForEveryRank) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), smallPieces(true));
  const int ranks = mpiEnvironment().worldSize();
  for (int call = 0; call < 3; ++call) {
    double figure = reducer.measureRoundTripNs();
    double lowest = 0;
    double highest = 0;
    RINGTRAIN_MPI_CHECK(MPI_Allreduce(&figure, &lowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    RINGTRAIN_MPI_CHECK(MPI_Allreduce(&figure, &highest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    EXPECT_EQ(lowest, highest) << "ranks got different figures in call " << call;
    if (ranks == 1) {
      EXPECT_EQ(figure, 0.0) << "no other core to probe";
    } else {
      // A round trip takes time, and less than a second even with more ranks than cores.
      EXPECT_GT(figure, 0.0);
      EXPECT_LT(figure, 1e9) << "ns";
    }
  }
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
