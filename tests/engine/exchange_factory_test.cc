// makeGradientExchange under mpirun: every host backend it makes averages the ranks' gradients
// to the same bits on every rank, through the buffers it hands out (in place on one rank, out of
// place on several, in shared memory for shm); shm sends no messages, the others name their
// communicator; with shardUpdates (ZeRO-1) ring and tuned hand each rank its shards and gather
// the updated parameters; combinations a backend cannot do are refused on every rank.
#include "engine/exchange_factory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/fingerprint.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using engine::ExchangeBackend;
using engine::GradientBucket;
using engine::GradientSegment;
using engine::StepBuffers;

std::vector<GradientSegment> layers() {
  return {{"fc1.weight", 0, 3000},
          {"fc1.bias", 3000, 30},
          {"fc2.weight", 3030, 300},
          {"fc2.bias", 3330, 10}};
}
constexpr std::size_t kCount = 3340;

float gradientValue(int rank, std::size_t i) {
  return std::cos(0.01f * static_cast<float>(i % 977) + static_cast<float>(rank));
}

class ExchangeFactoryTest : public ::testing::TestWithParam<ExchangeBackend> {};

TEST_P(ExchangeFactoryTest, AveragesThroughTheBuffersItHandsOut) {
  const int rank = mpiEnvironment().worldRank();
  const int ranks = mpiEnvironment().worldSize();
  engine::ExchangeOptions options;
  options.fusionThresholdBytes = 4096;  // several buckets
  options.test.ranksPerNode = 2;        // hierarchical: 2 ranks a node
  auto exchange = engine::makeGradientExchange(GetParam(), MPI_COMM_WORLD, layers(), options);
  std::vector<float> model(kCount);
  const StepBuffers buffers = exchange->hostBuffers(model);
  ASSERT_EQ(buffers.gradients.size(), kCount);
  ASSERT_EQ(buffers.averaged.size(), kCount);
  const bool shm = GetParam() == ExchangeBackend::kShm;
  EXPECT_EQ(buffers.gradients.data() == model.data(), !shm)
      << "shm keeps the gradients in its window, the others read the model's";
  EXPECT_EQ(buffers.averaged.data() == buffers.gradients.data(), ranks == 1 && !shm)
      << "in place on one rank only";
  EXPECT_EQ(exchange->communicator() == nullptr, shm);

  exchange->beginStep(buffers);
  const std::vector<GradientSegment> all = layers();
  for (int s = 3; s >= 0; --s) {
    const GradientSegment& layer = all[static_cast<std::size_t>(s)];
    for (std::size_t i = layer.offset; i < layer.offset + layer.count; ++i)
      buffers.gradients[i] = gradientValue(rank, i);
    exchange->segmentReady(s);
  }
  std::size_t handed = 0;
  exchange->finishStep([&](const GradientBucket& b) { handed += b.count; });
  EXPECT_EQ(handed, kCount);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    double mean = 0;
    for (int r = 0; r < ranks; ++r)
      mean += gradientValue(r, i);
    wrong += !(std::fabs(buffers.averaged[i] - mean / ranks) <= 1e-6);
  }
  EXPECT_EQ(wrong, 0u) << "elements off the mean on rank " << rank;
  const auto differing = ranksDifferingFromRankZero(
      fingerprint(buffers.averaged.data(), buffers.averaged.size_bytes()));
  EXPECT_TRUE(differing.empty()) << "rank " << differing.front() << " averaged other bits";
}

INSTANTIATE_TEST_SUITE_P(HostBackends, ExchangeFactoryTest,
                         ::testing::Values(ExchangeBackend::kMpi, ExchangeBackend::kRing,
                                           ExchangeBackend::kTuned, ExchangeBackend::kHierarchical,
                                           ExchangeBackend::kShm),
                         [](const ::testing::TestParamInfo<ExchangeBackend>& param) {
                           return std::string(engine::name(param.param));
                         });

class ShardingExchangeTest : public ::testing::TestWithParam<ExchangeBackend> {};

// ZeRO-1 (shardUpdates): finishStep hands each rank one shard of every bucket, averaged; the
// ranks' shards tile every bucket; once each rank has "updated" its shards (here: parameter =
// average) and said so, every rank holds every bucket's parameters.
TEST_P(ShardingExchangeTest, HandsOverShardsAndGathersTheUpdatedParameters) {
  const int rank = mpiEnvironment().worldRank();
  const int ranks = mpiEnvironment().worldSize();
  engine::ExchangeOptions options;
  options.fusionThresholdBytes = 4096;  // several buckets
  options.shardUpdates = true;
  auto exchange = engine::makeGradientExchange(GetParam(), MPI_COMM_WORLD, layers(), options);
  std::vector<float> model(kCount), parameters(kCount, -1.0f);
  StepBuffers buffers = exchange->hostBuffers(model);
  buffers.parameters = parameters;
  exchange->beginStep(buffers);
  const std::vector<GradientSegment> segments = layers();
  for (int s = 3; s >= 0; --s) {
    const GradientSegment& layer = segments[static_cast<std::size_t>(s)];
    for (std::size_t i = layer.offset; i < layer.offset + layer.count; ++i)
      buffers.gradients[i] = gradientValue(rank, i);
    exchange->segmentReady(s);
  }
  std::vector<int> owners(kCount, 0);
  exchange->finishStep([&](const GradientBucket& shard) {
    for (std::size_t i = shard.offset; i < shard.offset + shard.count; ++i) {
      owners[i] = 1;
      parameters[i] = buffers.averaged[i];
    }
    exchange->parametersUpdated(shard);
  });
  exchange->awaitParameters();
  MPI_Allreduce(MPI_IN_PLACE, owners.data(), static_cast<int>(kCount), MPI_INT, MPI_SUM,
                MPI_COMM_WORLD);
  EXPECT_EQ(std::count(owners.begin(), owners.end(), 1), static_cast<long>(kCount))
      << "every element has exactly one owner";
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    double mean = 0;
    for (int r = 0; r < ranks; ++r)
      mean += gradientValue(r, i);
    wrong += !(std::fabs(parameters[i] - mean / ranks) <= 1e-6);
  }
  EXPECT_EQ(wrong, 0u) << "gathered parameters off the mean on rank " << rank;
  const auto differing =
      ranksDifferingFromRankZero(fingerprint(parameters.data(), kCount * sizeof(float)));
  EXPECT_TRUE(differing.empty()) << "rank " << differing.front() << " gathered other bits";
}

INSTANTIATE_TEST_SUITE_P(SplittingBackends, ShardingExchangeTest,
                         ::testing::Values(ExchangeBackend::kRing, ExchangeBackend::kTuned),
                         [](const ::testing::TestParamInfo<ExchangeBackend>& param) {
                           return std::string(engine::name(param.param));
                         });

TEST(ExchangeFactoryRefusalTest, ShardingNeedsAnAllreduceThatSplits) {
  engine::ExchangeOptions options;
  options.shardUpdates = true;
  for (const ExchangeBackend backend :
       {ExchangeBackend::kShm, ExchangeBackend::kMpi, ExchangeBackend::kHierarchical}) {
    EXPECT_THROW(engine::makeGradientExchange(backend, MPI_COMM_WORLD, layers(), options),
                 std::invalid_argument)
        << engine::name(backend);
  }
}

TEST(ExchangeFactoryRefusalTest, CompressionNeedsMessagesOnTheHost) {
  engine::ExchangeOptions options;
  options.compression = engine::Compression::kFloat16;
  EXPECT_THROW(
      engine::makeGradientExchange(ExchangeBackend::kShm, MPI_COMM_WORLD, layers(), options),
      std::invalid_argument);
}

TEST(ExchangeFactoryNamesTest, EveryBackendHasOneNameAndTheControlBackendSendsHostMessages) {
  for (const auto& entry : engine::kExchangeBackendNames) {
    EXPECT_EQ(engine::name(entry.value), entry.name);
    EXPECT_FALSE(collectives::isDeviceBackend(engine::controlBackend(entry.value))) << entry.name;
  }
  EXPECT_EQ(engine::controlBackend(ExchangeBackend::kMpi), collectives::Backend::kMpi);
  EXPECT_EQ(engine::controlBackend(ExchangeBackend::kShm), collectives::Backend::kRing);
  EXPECT_EQ(engine::controlBackend(ExchangeBackend::kNccl), collectives::Backend::kRing);
}

}  // namespace
}  // namespace ringtrain::testing
