// SharedGradientReducer under mpirun: every rank's averages equal (g_0 + ... + g_{n-1}) / n summed
// in rank order, to the bit, for several steps; overlap on and off give the same bits; every
// element is handed over once on every rank, in bucket order, after its average is final; steps
// on buffers other than hostBuffers() are refused.
#include "engine/shared_gradient_reducer.h"

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

using engine::GradientBucket;
using engine::GradientSegment;
using engine::SharedGradientReducer;
using engine::ExchangeOptions;
using engine::StepBuffers;

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

// One step's backward: layers from the last to the first, each written then announced, with a
// little work in between so that ranks really average while others still compute.
void writeAndAnnounce(SharedGradientReducer& reducer, std::span<float> gradients, int rank,
                      int step) {
  const auto all = segments();
  for (int s = static_cast<int>(all.size()) - 1; s >= 0; --s) {
    const GradientSegment& seg = all[static_cast<std::size_t>(s)];
    for (std::size_t i = seg.offset; i < seg.offset + seg.count; ++i)
      gradients[i] = gradientValue(rank, i, step);
    reducer.segmentReady(s);
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (rank + 1)));
  }
}

StepResults runSteps(const ExchangeOptions& options, int steps) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), options);
  int rank = 0;
  int ranks = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  std::vector<float> model(kCount);
  const StepBuffers buffers = reducer.hostBuffers(model);
  StepResults run;
  for (int step = 0; step < steps; ++step) {
    reducer.beginStep(buffers);
    writeAndAnnounce(reducer, buffers.gradients, rank, step);
    const std::vector<float> expected = expectedAverage(ranks, step);
    const std::span<const float> averaging = buffers.averaged;
    run.handed.emplace_back();
    reducer.finishStep([&](const GradientBucket& b) {
      run.handed.back().push_back({b.index, b.offset, b.count});
      for (std::size_t i = b.offset; i < b.offset + b.count; ++i)
        run.handedBeforeAveraged += std::memcmp(&averaging[i], &expected[i], sizeof(float)) != 0;
    });
    run.averages.emplace_back(buffers.averaged.begin(), buffers.averaged.end());
  }
  return run;
}

std::size_t differingBits(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

ExchangeOptions smallPieces(bool overlap) {
  ExchangeOptions options;
  options.fusionThresholdBytes = 16 << 10;  // several buckets
  options.pieceBytes = 4096;                // many pieces, shared out among the ranks
  options.overlap = overlap;
  options.stallTimeoutSeconds = 120;
  return options;
}

TEST(SharedGradientReducerTest, AveragesEqualTheRankOrderSumOnEveryRankForEveryStep) {
  const int ranks = mpiEnvironment().worldSize();
  const StepResults run = runSteps(smallPieces(true), 4);
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
    const StepResults run = runSteps(smallPieces(overlap), 3);
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

TEST(SharedGradientReducerTest, OverlapOnAndOffGiveTheSameBits) {
  const StepResults overlapped = runSteps(smallPieces(true), 3);
  const StepResults sequential = runSteps(smallPieces(false), 3);
  for (std::size_t step = 0; step < 3; ++step) {
    EXPECT_EQ(differingBits(overlapped.averages[step], sequential.averages[step]), 0u)
        << "step " << step;
  }
}

TEST(SharedGradientReducerTest, OnePieceForTheWholeBufferWorksToo) {
  ExchangeOptions options = smallPieces(true);
  options.pieceBytes = 1 << 20;
  const StepResults run = runSteps(options, 2);
  EXPECT_EQ(differingBits(run.averages[1], expectedAverage(mpiEnvironment().worldSize(), 1)), 0u);
}

TEST(SharedGradientReducerTest, RefusesStepsOnBuffersOfItsOwnAndModelsOfAnotherSize) {
  SharedGradientReducer reducer(MPI_COMM_WORLD, segments(), smallPieces(true));
  std::vector<float> own(kCount);
  const StepBuffers buffers = reducer.hostBuffers(own);
  EXPECT_NE(buffers.gradients.data(), own.data()) << "the gradients must move into the window";
  EXPECT_THROW(reducer.beginStep({own, buffers.averaged}), std::logic_error);
  std::vector<float> larger(kCount + 1);
  EXPECT_THROW(reducer.hostBuffers(larger), std::invalid_argument);
}

// A communicator of one rank: the average is the rank's own gradients.
TEST(SharedGradientReducerTest, OneRankAloneAveragesToItsOwnGradients) {
  SharedGradientReducer reducer(MPI_COMM_SELF, segments(), smallPieces(true));
  std::vector<float> model(kCount);
  const StepBuffers buffers = reducer.hostBuffers(model);
  reducer.beginStep(buffers);
  for (std::size_t i = 0; i < kCount; ++i)
    buffers.gradients[i] = gradientValue(5, i, 0);
  for (int s = static_cast<int>(segments().size()) - 1; s >= 0; --s)
    reducer.segmentReady(s);
  reducer.finishStep([](const GradientBucket&) {});
  const std::span<float> averaged = buffers.averaged;
  for (std::size_t i = 0; i < kCount; i += 997)
    EXPECT_EQ(averaged[i], gradientValue(5, i, 0)) << i;
}

}  // namespace
}  // namespace ringtrain::testing
