// GradientReducer under mpirun: averages per bucket on every backend, with and without overlap
// (bit for bit the same), with fp16/bf16 compression, buckets handed over in order, and errors
// of the communication thread reported on every rank.
#include "engine/gradient_reducer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <tuple>
#include <vector>

#include "base/fingerprint.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::Backend;
using engine::Compression;
using engine::GradientBucket;
using engine::GradientReducer;
using engine::GradientSegment;
using engine::ExchangeOptions;

// Layers of an MLP-like model, in forward order; 41 KiB threshold gives several buckets.
std::vector<GradientSegment> mlpSegments() {
  return {{"fc1.weight", 0, 6000}, {"fc1.bias", 6000, 60},    {"fc2.weight", 6060, 3600},
          {"fc2.bias", 9660, 60},  {"fc3.weight", 9720, 600}, {"fc3.bias", 10320, 10}};
}
constexpr std::size_t kCount = 10330;

float gradientValue(int rank, std::size_t i, int step) {
  return std::sin(0.001f * static_cast<float>(i) + static_cast<float>(rank) + 0.1f * step);
}

// Runs `steps` steps, announcing layers in reverse order like backward (with a little work in
// between, so that the communication thread really runs alongside), and returns the averages.
std::vector<float> runSteps(const BackendConfig& config, const ExchangeOptions& options, int steps,
                            std::vector<int>* callbackOrder = nullptr) {
  // Yielding in both modes, as the trainer does: the mpi backend then uses the same (non-
  // blocking) MPI collectives with overlap on and off, so the sums are formed in the same order.
  collectives::CommunicatorOptions commOptions = config.options;
  commOptions.yieldWhileWaiting = true;
  auto comm = collectives::makeCommunicator(config.backend, MPI_COMM_WORLD, commOptions);
  GradientReducer reducer(*comm, mlpSegments(), options);
  std::vector<float> gradients(kCount), averaged(kCount, -1.0f);
  for (int step = 0; step < steps; ++step) {
    reducer.beginStep({gradients, averaged});
    const auto segments = mlpSegments();
    for (int s = static_cast<int>(segments.size()) - 1; s >= 0; --s) {
      const GradientSegment& seg = segments[static_cast<std::size_t>(s)];
      for (std::size_t i = seg.offset; i < seg.offset + seg.count; ++i) {
        gradients[i] = gradientValue(comm->rank(), i, step);
      }
      reducer.segmentReady(s);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    reducer.finishStep([&](const GradientBucket& b) {
      if (callbackOrder && step == 0) callbackOrder->push_back(b.index);
    });
  }
  return averaged;
}

class GradientReducerTest
    : public ::testing::TestWithParam<std::tuple<BackendConfig, bool, Compression>> {};

TEST_P(GradientReducerTest, AveragesEveryBucketAcrossRanksAndHandsThemOverInOrder) {
  const auto& [config, overlap, compression] = GetParam();
  const int ranks = mpiEnvironment().worldSize();
  ExchangeOptions options;
  options.fusionThresholdBytes = 16 * 1024;
  options.overlap = overlap;
  options.compression = compression;
  std::vector<int> order;
  const std::vector<float> averaged = runSteps(config, options, 3, &order);

  const auto buckets = engine::planBuckets(mlpSegments(), options.fusionThresholdBytes);
  ASSERT_GT(buckets.size(), 2u);
  std::vector<int> expectedOrder;
  for (const auto& b : buckets)
    expectedOrder.push_back(b.index);
  EXPECT_EQ(order, expectedOrder);

  // The last step's mean over ranks, to float32 accuracy (16 bits: their rounding, per hop).
  const double tolerance = compression == Compression::kNone      ? 1e-6
                           : compression == Compression::kFloat16 ? 2e-3 * ranks
                                                                  : 1.6e-2 * ranks;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    double mean = 0;
    for (int r = 0; r < ranks; ++r)
      mean += gradientValue(r, i, 2);
    mean /= ranks;
    if (!(std::fabs(averaged[i] - mean) <= tolerance)) ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << "elements off the mean on rank " << mpiEnvironment().worldRank();
  const auto differing = ranksDifferingFromRankZero(
      fingerprint(averaged.data(), averaged.size() * sizeof(float)));
  EXPECT_TRUE(differing.empty()) << "rank " << differing.front() << " averaged other bits";
}

TEST_P(GradientReducerTest, OverlapOnAndOffGiveTheSameBits) {
  const auto& [config, overlap, compression] = GetParam();
  if (!overlap) GTEST_SKIP() << "compared in the overlap instance";
  ExchangeOptions options;
  options.fusionThresholdBytes = 16 * 1024;
  options.compression = compression;
  options.overlap = true;
  const auto on = runSteps(config, options, 2);
  options.overlap = false;
  const auto off = runSteps(config, options, 2);
  EXPECT_EQ(on, off);
}

std::string paramName(
    const ::testing::TestParamInfo<std::tuple<BackendConfig, bool, Compression>>& info) {
  const auto& [config, overlap, compression] = info.param;
  return config.label + (overlap ? "_overlap_" : "_inline_") +
         std::string(engine::name(compression));
}

INSTANTIATE_TEST_SUITE_P(
    Backends, GradientReducerTest,
    ::testing::Combine(::testing::Values(backendConfigs()[0], backendConfigs()[1]),
                       ::testing::Bool(),
                       ::testing::Values(Compression::kNone, Compression::kFloat16,
                                         Compression::kBFloat16)),
    paramName);

// Rank 0 has a layer more than the others: the ring's agreement fails on the communication
// thread, and finishStep throws the same error on every rank instead of hanging.
TEST(GradientReducerErrorTest, ADisagreementOnTheCommunicationThreadIsThrownByFinishStep) {
  if (mpiEnvironment().worldSize() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  collectives::CommunicatorOptions commOptions;
  commOptions.yieldWhileWaiting = true;
  auto comm = collectives::makeCommunicator(Backend::kRing, MPI_COMM_WORLD, commOptions);
  std::vector<GradientSegment> segments = {{"a", 0, 100}, {"b", 100, 100}};
  if (comm->rank() == 0) segments[1].count = 101;
  ExchangeOptions options;
  options.fusionThresholdBytes = 1;  // a bucket per layer
  GradientReducer reducer(*comm, segments, options);
  std::vector<float> gradients(201, 1.0f), averaged(201);
  reducer.beginStep({gradients, averaged});
  reducer.segmentReady(1);
  reducer.segmentReady(0);
  std::string message;
  try {
    reducer.finishStep([](const GradientBucket&) {});
  } catch (const collectives::CollectiveMismatchError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("ranks disagree"), std::string::npos) << "got: '" << message << "'";
}

}  // namespace
}  // namespace ringtrain::testing
