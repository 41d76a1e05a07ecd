// The trainer under mpirun: exact data parallelism, identical replicas, linreg, MNIST accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <vector>

#include <mpi.h>

#include "collectives/communicator.h"
#include "collectives/fingerprint.h"
#include "data/idx_dataset.h"
#include "data/synthetic_dataset.h"
#include "data/synthetic_token_dataset.h"
#include "models/flush_to_zero.h"
#include "models/matrix_products.h"
#include "src/trainer/batch_source.h"
#include "src/trainer/trainer.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain {
namespace {

struct Sources {
  std::unique_ptr<BatchSource> train, test;
};

// 960 samples: divisible by 1, 2, 3 and 4 ranks, so no rank count skips a sample (see
// data/sharded_sampler.h) and the equivalence holds at every step.
Sources syntheticMnistLike() {
  data::SyntheticOptions o;
  o.size = 960;
  o.seed = 7;
  data::DatasetPair pair = data::makeSyntheticPair(o, 96);
  return {classificationSource(std::move(pair.train)), classificationSource(std::move(pair.test))};
}

double norm(std::span<const float> v) {
  double sum = 0;
  for (const float x : v)
    sum += double{x} * x;
  return std::sqrt(sum);
}

double relativeDifference(std::span<const float> a, std::span<const float> b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    sum += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
  return std::sqrt(sum) / norm(b);
}

std::vector<int> ranksWithOtherParameters(std::span<const float> parameters) {
  const std::uint64_t mine = collectives::fingerprint(parameters.data(), parameters.size_bytes());
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  std::vector<int> differing;
  for (int r = 1; r < size; ++r) {
    if (all[r] != all[0]) differing.push_back(r);
  }
  return differing;
}

TrainerEnvironment quiet(MPI_Comm comm = MPI_COMM_WORLD) {
  TrainerEnvironment environment;
  environment.comm = comm;
  environment.log = false;
  return environment;
}

std::vector<float> copyOf(std::span<const float> values) {
  return {values.begin(), values.end()};
}

// A backend and a compression as the command line names them.
void useBackend(TrainConfig& config, std::string_view backend) {
  config.backend = valueIn(engine::kExchangeBackendNames, backend).value();
}
engine::Compression compressionNamed(std::string_view name) {
  return valueIn(engine::kCompressionNames, name).value();
}

std::size_t differingBits(std::span<const float> a, std::span<const float> b) {
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

class ExactDataParallelism : public ::testing::TestWithParam<std::string> {};

// Trains `config` with batch B per rank on every rank, and alone on each rank with batch N·B
// (the reference), and expects the same parameters to floating-point reassociation, the same
// bits on every rank, and weights that moved; `tolerance` is that of the parameters' relative
// difference.
void expectOneRankWithTheWholeBatch(TrainConfig config, const Sources& sources, int batch,
                                    double tolerance = 1e-5) {
  const int ranks = testing::mpiEnvironment().worldSize();
  TrainConfig single = config;
  single.batchSize = batch * ranks;
  Trainer reference(single, *sources.train, *sources.test, quiet(MPI_COMM_SELF));
  const std::vector<float> initial = copyOf(reference.model().parameters());
  reference.run();

  config.batchSize = batch;
  Trainer parallel(config, *sources.train, *sources.test, quiet());
  const TrainingSummary summary = parallel.run();

  const auto expected = reference.model().parameters();
  const auto got = parallel.model().parameters();
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_GT(relativeDifference(initial, expected), 1e-2) << "training did not move the weights";
  EXPECT_LE(relativeDifference(got, expected), tolerance)
      << ranks << " ranks x batch " << batch << " differ from 1 rank x batch " << batch * ranks;
  EXPECT_TRUE(summary.replicasIdentical);
  const std::vector<int> differing = ranksWithOtherParameters(got);
  EXPECT_TRUE(differing.empty()) << "rank " << differing.front() << " holds other parameters";
}

// N ranks with batch B must train exactly as one rank with batch N*B: after 24 steps of SGD with
// momentum the parameters agree to floating-point reassociation, and every rank holds the same
// bits.
TEST_P(ExactDataParallelism, NRanksWithBatchBEqualOneRankWithBatchNB) {
  models::enableFlushToZero();
  const Sources sources = syntheticMnistLike();
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {512, 512};
  config.optimizer = OptimizerKind::kSgd;
  config.momentum = 0.9;
  config.learningRate = 0.05;
  config.steps = 24;
  config.logEvery = 0;
  config.seed = 11;
  useBackend(config, GetParam());
  config.fusionThresholdBytes = 256 << 10;  // several buckets, reduced while backward runs

  expectOneRankWithTheWholeBatch(config, sources, 8);
}

INSTANTIATE_TEST_SUITE_P(Backends, ExactDataParallelism,
                         ::testing::Values("ring", "mpi", "hierarchical", "shm"),
                         [](const auto& param) { return param.param; });

// The same equivalence with bfloat16 matrix products. A sample's inputs round the same way
// whatever batch it is in, and so do the loss gradients, which carry the mean's 1/B, when the
// two 1/B differ by a power of two: then only float32 sums are reassociated. With 3 ranks
// (1/24 against 1/8) the loss gradients round differently, an error of bfloat16's size that
// training carries on: within a few per cent after 24 steps.
TEST(ExactDataParallelismInBfloat16, NRanksWithBatchBEqualOneRankWithBatchNB) {
  if (!models::bf16ProductsSupported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  models::enableFlushToZero();
  const Sources sources = syntheticMnistLike();
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {256, 128};
  config.learningRate = 0.05;
  config.steps = 24;
  config.logEvery = 0;
  config.seed = 11;
  config.precision = models::Precision::kBfloat16;
  useBackend(config, "ring");
  const int ranks = testing::mpiEnvironment().worldSize();
  const bool powerOfTwo = (ranks & (ranks - 1)) == 0;
  expectOneRankWithTheWholeBatch(config, sources, 8, powerOfTwo ? 1e-5 : 5e-2);
  models::setMatrixPrecision(models::Precision::kFloat32);  // the process-wide default again
}

class GptDataParallelism : public ::testing::TestWithParam<std::string> {};

// The same equivalence for the GPT: token windows (96, divisible by 1 to 4 ranks), one label per
// position, the output head tied to the token embedding, weight decay on matrices only and the
// gradient clipped to a global norm it exceeds (so the norm of the average must be the same
// on every rank).
TEST_P(GptDataParallelism, NRanksWithBatchBEqualOneRankWithBatchNB) {
  models::enableFlushToZero();
  data::SyntheticTokenOptions tokens;
  tokens.vocabulary = 97;
  tokens.context = 16;
  tokens.size = 96;
  tokens.seed = 5;
  data::DatasetPair pair = data::makeSyntheticTokenPair(tokens, 8);
  const Sources sources{classificationSource(std::move(pair.train)),
                        classificationSource(std::move(pair.test))};
  TrainConfig config;
  config.model = ModelKind::kGpt;
  config.gpt = {.layers = 2, .heads = 2, .width = 32, .context = 16, .vocabulary = 97};
  config.optimizer = OptimizerKind::kSgd;
  config.learningRate = 0.1;
  config.weightDecay = 0.01;
  config.clipGradNorm = 0.5;
  config.steps = 12;
  config.logEvery = 0;
  config.seed = 13;
  useBackend(config, GetParam());
  config.fusionThresholdBytes = 32 << 10;

  expectOneRankWithTheWholeBatch(config, sources, 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, GptDataParallelism, ::testing::Values("ring", "shm"),
                         [](const auto& param) { return param.param; });

// With overlap each bucket is averaged on the communication thread while backward runs, and its
// parameters are updated as soon as it is done; without, everything happens after backward. The
// collectives and the arithmetic are the same, so the parameters must be the same to the bit, for
// every backend and compression, with buckets of several sizes and an optimiser with state.
class OverlapOnOff : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(OverlapOnOff, GiveTheSameParametersToTheBit) {
  models::enableFlushToZero();
  const Sources sources = syntheticMnistLike();
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {256, 128, 64};
  config.optimizer = OptimizerKind::kAdam;
  config.learningRate = 0.001;
  config.batchSize = 16;
  config.steps = 20;
  config.logEvery = 0;
  useBackend(config, std::get<0>(GetParam()));
  config.compression = compressionNamed(std::get<1>(GetParam()));
  config.fusionThresholdBytes = 64 << 10;

  config.overlap = false;
  Trainer sequential(config, *sources.train, *sources.test, quiet());
  ASSERT_GE(sequential.exchange().buckets().size(), 3u) << "the test needs several buckets";
  const std::vector<float> initial = copyOf(sequential.model().parameters());
  sequential.run();
  config.overlap = true;
  Trainer overlapped(config, *sources.train, *sources.test, quiet());
  overlapped.run();

  const auto a = sequential.model().parameters();
  const auto b = overlapped.model().parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_GT(relativeDifference(initial, a), 1e-3) << "training did not move the weights";
  EXPECT_EQ(differingBits(a, b), 0u) << "of " << a.size() << " parameters differ on rank "
                                     << testing::mpiEnvironment().worldRank();
  const std::vector<int> others = ranksWithOtherParameters(b);
  EXPECT_TRUE(others.empty()) << "rank " << others.front() << " holds other parameters";
}

INSTANTIATE_TEST_SUITE_P(BackendsAndCompression, OverlapOnOff,
                         ::testing::Combine(::testing::Values("ring", "mpi"),
                                            ::testing::Values("none", "fp16", "bf16")),
                         [](const auto& param) {
                           return std::get<0>(param.param) + "_" + std::get<1>(param.param);
                         });
// --prefetch on gathers each next batch on a thread while the step trains (not at an epoch's
// start, whose permutation only the sampler's next() draws): the batches, hence the parameters,
// are the same to the bit as without, across epochs and their last, smaller batches.
TEST(Prefetch, OnAndOffGiveTheSameParametersToTheBit) {
  const Sources sources = syntheticMnistLike();
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {64};
  config.batchSize = 50;  // 960 / ranks samples a rank: an epoch ends in a smaller batch
  config.steps = 25;
  config.logEvery = 0;
  config.prefetch = Prefetch::kOff;
  Trainer plain(config, *sources.train, *sources.test, quiet());
  plain.run();
  config.prefetch = Prefetch::kOn;
  Trainer prefetching(config, *sources.train, *sources.test, quiet());
  prefetching.run();

  const int ranks = testing::mpiEnvironment().worldSize();
  const std::int64_t stepsPerEpoch = (960 / ranks + 49) / 50;
  const std::int64_t epochStarts = (25 + stepsPerEpoch - 1) / stepsPerEpoch;
  EXPECT_EQ(plain.batches().prefetchedTakes(), 0);
  EXPECT_EQ(prefetching.batches().directTakes(), epochStarts);
  EXPECT_EQ(prefetching.batches().prefetchedTakes(), 25 - epochStarts);
  const auto a = plain.model().parameters();
  const auto b = prefetching.model().parameters();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(differingBits(a, b), 0u) << "of " << a.size() << " parameters differ on rank "
                                     << testing::mpiEnvironment().worldRank();
}

// The shared-memory exchange sends no messages, so there is nothing to compress.
INSTANTIATE_TEST_SUITE_P(SharedMemory, OverlapOnOff,
                         ::testing::Values(std::tuple<std::string, std::string>("shm", "none")),
                         [](const auto& param) { return std::get<0>(param.param) + "_none"; });

TEST(TrainerTest, LinregRecoversSlopeTwoAndInterceptTen) {
  TrainConfig config;
  config.model = ModelKind::kLinreg;
  config.batchSize = 32;
  config.learningRate = 0.1;
  config.epochs = 3;
  config.logEvery = 0;
  data::LinearRegressionOptions o;
  const auto train = regressionSource(o);
  o.firstIndex = o.size;
  o.size = 2000;
  const auto test = regressionSource(o);
  Trainer trainer(config, *train, *test, quiet());
  const TrainingSummary summary = trainer.run();
  const auto p = trainer.model().parameters();
  const int rank = testing::mpiEnvironment().worldRank();
  EXPECT_NEAR(p[0], 2.0, 0.05) << "w on rank " << rank;
  EXPECT_NEAR(p[1], 10.0, 0.1) << "b on rank " << rank;
  EXPECT_LT(summary.lastEvaluation.meanLoss(), 0.02);  // the noise's variance is 0.01
}

// The MLP on the 10,000-digit MNIST sample that scripts/test.sh fetches (skipped without it),
// with gradients crossing the wire in 32 or 16 bits.
class MnistCompression : public ::testing::TestWithParam<std::string> {};

TEST_P(MnistCompression, MlpReaches95PercentWithTheDefaults) {
  const std::filesystem::path folder = RINGTRAIN_TEST_MNIST_DIR;
  if (!std::filesystem::exists(folder / "train-images-idx3-ubyte") &&
      !std::filesystem::exists(folder / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "no MNIST in " << folder << " (data/fetch_mnist.sh " << folder.string() << ")";
  }
  models::enableFlushToZero();
  data::DatasetPair pair = data::loadMnist(folder);
  const auto train = classificationSource(std::move(pair.train));
  const auto test = classificationSource(std::move(pair.test));
  TrainConfig config;  // the defaults: mlp 512,512, sgd lr 0.1 momentum 0.9, cosine, 15 epochs
  config.logEvery = 0;
  config.compression = compressionNamed(GetParam());
  Trainer trainer(config, *train, *test, quiet());
  const TrainingSummary summary = trainer.run();
  EXPECT_GE(summary.lastEvaluation.accuracy(), 0.95) << "compression " << GetParam();
  EXPECT_EQ(summary.lastEvaluation.samples, test->size()) << "every test sample counted once";
  EXPECT_TRUE(summary.replicasIdentical);
}

INSTANTIATE_TEST_SUITE_P(WireFormats, MnistCompression, ::testing::Values("none", "fp16", "bf16"),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace ringtrain
