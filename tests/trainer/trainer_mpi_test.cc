// The trainer under mpirun: exact data parallelism, identical replicas, --zero 1 against --zero 0,
// linreg, MNIST accuracy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
#include <vector>

#include <mpi.h>

#include "base/fingerprint.h"
#include "collectives/communicator.h"
#include "data/idx_dataset.h"
#include "data/synthetic_dataset.h"
#include "data/synthetic_token_dataset.h"
#include "models/flush_to_zero.h"
#include "models/matrix_products.h"
#include "storage/tensorboard_writer.h"
#include "tests/support/mpi_test_environment.h"
#include "training/batch_source.h"
#include "training/lr_schedule.h"
#include "training/trainer.h"

namespace ringtrain::training {
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
  const std::uint64_t mine = fingerprint(parameters.data(), parameters.size_bytes());
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
  config.exchange.backend = valueIn(engine::kExchangeBackendNames, backend).value();
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

// Trains `config` with batch B per rank on every rank (K = config.accumulateSteps micro-batches
// of B a step), and alone on each rank with batch N·K·B (the reference), and expects the same
// parameters to floating-point reassociation (or `tolerance`), the same bits on every rank, and
// weights that moved. Returns the parallel run's summary.
TrainingSummary expectOneRankWithTheWholeBatch(TrainConfig config, const Sources& sources,
                                               int batch, double tolerance = 1e-5) {
  const int ranks = testing::mpiEnvironment().worldSize();
  TrainConfig single = config;
  single.batchSize = batch * ranks * config.accumulateSteps;
  single.accumulateSteps = 1;
  single.exchange.compression = engine::Compression::kNone;
  Trainer reference(single, *sources.train, *sources.test, quiet(MPI_COMM_SELF));
  const std::vector<float> initial = copyOf(reference.model().parameters());
  reference.run();

  config.batchSize = batch;
  Trainer parallel(config, *sources.train, *sources.test, quiet());
  const TrainingSummary summary = parallel.run();

  const auto expected = reference.model().parameters();
  const auto got = parallel.model().parameters();
  EXPECT_EQ(got.size(), expected.size());
  if (got.size() != expected.size()) return summary;
  EXPECT_GT(relativeDifference(initial, expected), 1e-2) << "training did not move the weights";
  EXPECT_LE(relativeDifference(got, expected), tolerance)
      << ranks << " ranks x " << config.accumulateSteps << " micro-batches of " << batch
      << " differ from 1 rank x batch " << single.batchSize;
  EXPECT_TRUE(summary.replicasIdentical);
  const std::vector<int> differing = ranksWithOtherParameters(got);
  EXPECT_TRUE(differing.empty()) << "rank " << differing.front() << " holds other parameters";
  return summary;
}

// N ranks with batch B must train exactly as one rank with batch N*B: after 24 steps of SGD with
// momentum the parameters agree to floating-point reassociation, and every rank holds the same
// bits.
// The MLP these equivalences train: SGD with momentum, several buckets reduced while backward
// runs.
TrainConfig momentumMlp(std::string_view backend, std::int64_t steps) {
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {512, 512};
  config.optimizer = OptimizerKind::kSgd;
  config.momentum = 0.9;
  config.learningRate = 0.05;
  config.steps = steps;
  config.logEvery = 0;
  config.seed = 11;
  useBackend(config, backend);
  config.exchange.fusionThresholdBytes = 256 << 10;
  return config;
}

TEST_P(ExactDataParallelism, NRanksWithBatchBEqualOneRankWithBatchNB) {
  models::enableFlushToZero();
  expectOneRankWithTheWholeBatch(momentumMlp(GetParam(), 24), syntheticMnistLike(), 8);
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

// Token windows (96, divisible by 1 to 4 ranks) for the GPT below.
Sources syntheticTokenWindows() {
  data::SyntheticTokenOptions tokens;
  tokens.vocabulary = 97;
  tokens.context = 16;
  tokens.size = 96;
  tokens.seed = 5;
  data::DatasetPair pair = data::makeSyntheticTokenPair(tokens, 8);
  return {classificationSource(std::move(pair.train)), classificationSource(std::move(pair.test))};
}

// A small GPT, its head tied to the token embedding, with weight decay on matrices only and the
// gradient clipped to a global norm it exceeds (so the norm of the average must be the same on
// every rank).
TrainConfig smallGpt(std::string_view backend) {
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
  useBackend(config, backend);
  config.exchange.fusionThresholdBytes = 32 << 10;
  return config;
}

// The same equivalence for the GPT: one label per position, the tied head, decay and clipping.
TEST_P(GptDataParallelism, NRanksWithBatchBEqualOneRankWithBatchNB) {
  models::enableFlushToZero();
  expectOneRankWithTheWholeBatch(smallGpt(GetParam()), syntheticTokenWindows(), 2);
}

// And with accumulation (AdamW): the tied head's gradient, made of two layers' parts, and the
// clipping of the accumulated average.
TEST_P(GptDataParallelism, NRanksWithTwoMicroBatchesEqualOneRankWithTheWholeBatch) {
  models::enableFlushToZero();
  TrainConfig config = smallGpt(GetParam());
  config.optimizer = OptimizerKind::kAdamW;
  config.learningRate = 0.003;
  config.steps = 8;  // 8·2·N·2 windows: one epoch of 96 at most
  config.accumulateSteps = 2;
  expectOneRankWithTheWholeBatch(config, syntheticTokenWindows(), 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, GptDataParallelism, ::testing::Values("ring", "shm"),
                         [](const auto& param) { return param.param; });

// --accumulate-steps K: N ranks with K micro-batches of B train as one rank with batch N·K·B,
// with overlap on (each layer announced on the last micro-batch, its earlier ones added first),
// and the gradients cross the wire once per step: one all-reduce per bucket and step.
class AccumulationParallelism : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(AccumulationParallelism, NRanksWithKMicroBatchesOfBEqualOneRankWithBatchNKB) {
  models::enableFlushToZero();
  // 12·K·N·8 samples: within the first epoch for K, N up to 3.
  TrainConfig config = momentumMlp(std::get<0>(GetParam()), 12);
  config.accumulateSteps = std::get<1>(GetParam());
  config.exchange.overlap = true;
  const TrainingSummary summary = expectOneRankWithTheWholeBatch(config, syntheticMnistLike(), 8);
  EXPECT_EQ(summary.steps, 12);
  EXPECT_EQ(summary.samples,
            12 * config.accumulateSteps * 8 * testing::mpiEnvironment().worldSize());
}

INSTANTIATE_TEST_SUITE_P(BackendsAndMicroBatches, AccumulationParallelism,
                         ::testing::Combine(::testing::Values("ring", "shm"),
                                            ::testing::Values(2, 3)),
                         [](const auto& param) {
                           return std::get<0>(param.param) + "_" +
                                  std::to_string(std::get<1>(param.param));
                         });

// The gradients of K micro-batches cross the wire once per optimiser step: the ring exchange's
// communicator enters one all-reduce per bucket and step, as without accumulation.
TEST(Accumulation, CommunicatesOncePerOptimiserStep) {
  const Sources sources = syntheticMnistLike();
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {256, 128};
  config.batchSize = 8;
  config.steps = 5;
  config.logEvery = 0;
  useBackend(config, "ring");
  config.exchange.fusionThresholdBytes = 64 << 10;
  std::uint64_t collectives[2] = {};
  for (const int k : {1, 4}) {
    config.accumulateSteps = k;
    Trainer trainer(config, *sources.train, *sources.test, quiet());
    const std::uint64_t before = trainer.exchange().communicator()->collectiveCount();
    trainer.run();
    collectives[k == 4] = trainer.exchange().communicator()->collectiveCount() - before;
    EXPECT_EQ(collectives[k == 4], 5 * trainer.exchange().buckets().size()) << "K = " << k;
  }
  EXPECT_EQ(collectives[0], collectives[1]);
}

// An epoch whose last batch is smaller: per rank 3 steps of 2 full micro-batches of 8, then a
// step of one full micro-batch and one of 4. That step's gradient is the mean over its 12
// samples (the micro-batches weighted 8 : 4), as one rank's last batch of 12·N has it.
TEST(Accumulation, AnEpochsSmallerLastBatchWeighsByItsSamples) {
  models::enableFlushToZero();
  const int ranks = testing::mpiEnvironment().worldSize();
  data::SyntheticOptions o;
  o.size = ranks * (3 * 16 + 12);
  o.seed = 7;
  data::DatasetPair pair = data::makeSyntheticPair(o, 32);
  const Sources sources{classificationSource(std::move(pair.train)),
                        classificationSource(std::move(pair.test))};
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {64};
  config.optimizer = OptimizerKind::kSgd;
  config.learningRate = 0.2;
  config.epochs = 1;
  config.logEvery = 0;
  config.seed = 3;
  config.accumulateSteps = 2;

  const TrainingSummary summary = expectOneRankWithTheWholeBatch(config, sources, 8);
  EXPECT_EQ(summary.steps, 4);
  EXPECT_EQ(summary.samples, o.size);
}

// What the log counts with --accumulate-steps 3 on --epochs 2: optimiser steps, ceil(2·S/3) for
// S micro-batches an epoch, each of 3·N·8 samples; the training log at every 5th optimiser step
// with the learning rate the schedule gives that step; an evaluation in each step where an epoch
// ended, and at the last.
TEST(Accumulation, TheLogCountsOptimiserStepsAndTheirSamples) {
  const int ranks = testing::mpiEnvironment().worldSize();
  const bool root = testing::mpiEnvironment().worldRank() == 0;
  const Sources sources = syntheticMnistLike();
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {32};
  config.batchSize = 8;
  config.epochs = 2;
  config.logEvery = 5;
  config.accumulateSteps = 3;
  const std::int64_t perEpoch = 960 / ranks / 8;
  const std::int64_t planned = (2 * perEpoch + 2) / 3;
  const std::filesystem::path logdir =
      std::filesystem::temp_directory_path() / ("accumulation_log_" + std::to_string(getpid()));
  TrainingSummary summary;
  {
    std::optional<storage::TrainingLog> log;
    if (root) log.emplace(logdir);
    TrainerEnvironment environment = quiet();
    environment.trainingLog = log ? &*log : nullptr;
    Trainer trainer(config, *sources.train, *sources.test, environment);
    EXPECT_EQ(trainer.plannedSteps(), planned);
    summary = trainer.run();
  }
  EXPECT_EQ(summary.steps, planned);
  EXPECT_EQ(summary.samples, planned * 3 * 8 * ranks);
  if (!root) return;
  LrScheduleOptions schedule;
  schedule.kind = config.lrSchedule;
  schedule.baseLr = config.learningRate;
  schedule.totalSteps = planned;
  std::vector<std::int64_t> trainSteps, testSteps, expectedTrain, expectedTest;
  std::ifstream metrics(logdir / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    const std::int64_t step = record["step"];
    if (record["split"] == "train") {
      trainSteps.push_back(step);
      EXPECT_EQ(record["learning_rate"].get<float>(),
                static_cast<float>(learningRateAt(schedule, step - 1)))
          << "step " << step;
    } else if (record["split"] == "test") {  // the "memory" line at the end is neither
      testSteps.push_back(step);
    }
  }
  std::filesystem::remove_all(logdir);
  for (std::int64_t step = 5; step < planned; step += 5)
    expectedTrain.push_back(step);
  expectedTrain.push_back(planned);
  for (const std::int64_t epoch : {1, 2})
    expectedTest.push_back((epoch * perEpoch + 2) / 3);
  if (expectedTest.back() != planned) expectedTest.push_back(planned);
  EXPECT_EQ(trainSteps, expectedTrain);
  EXPECT_EQ(testSteps, expectedTest);
}

// With fp16 on the wire, accumulation still trains as the whole batch does (in float32), to
// within fp16's relative rounding of one value, 2^-11, after 12 steps.
TEST(Accumulation, WithFp16CompressionStaysCloseToTheWholeBatch) {
  models::enableFlushToZero();
  const Sources sources = syntheticMnistLike();
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {128};
  config.optimizer = OptimizerKind::kSgd;
  config.momentum = 0.9;
  config.learningRate = 0.05;
  config.steps = 12;
  config.logEvery = 0;
  config.seed = 11;
  useBackend(config, "ring");
  config.exchange.compression = engine::Compression::kFloat16;
  config.accumulateSteps = 3;
  config.exchange.fusionThresholdBytes = 64 << 10;

  expectOneRankWithTheWholeBatch(config, sources, 8, std::ldexp(1.0, -11));
}

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
  config.exchange.compression = compressionNamed(std::get<1>(GetParam()));
  config.exchange.fusionThresholdBytes = 64 << 10;

  config.exchange.overlap = false;
  Trainer sequential(config, *sources.train, *sources.test, quiet());
  ASSERT_GE(sequential.exchange().buckets().size(), 3u) << "the test needs several buckets";
  const std::vector<float> initial = copyOf(sequential.model().parameters());
  sequential.run();
  config.exchange.overlap = true;
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

// --zero 1 (ZeRO-1) against --zero 0 on the ring and tuned backends: the same parameters to the
// bit on every rank, for the MLP and the GPT, SGD with momentum and AdamW, with overlap on and
// off, accumulation and 16-bit compression; each rank keeps its shard of the optimiser state
// only. (Checkpoints across zero settings: tests/resilience/resume_mpi_test.cc.)
//
// A case's name: model_optimizer_backend[_variant], variant one of nooverlap, accumulate, fp16,
// bf16.
struct Case {
  std::string model, optimizer, backend, variant;
};

Case parse(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (at <= name.size()) {
    const std::size_t end = std::min(name.find('_', at), name.size());
    parts.push_back(name.substr(at, end - at));
    at = end + 1;
  }
  parts.resize(4);
  return {parts[0], parts[1], parts[2], parts[3]};
}

// Small models whose buckets (fusion threshold 64 KiB) include some the ring takes and some small
// enough (at most 32 KiB) for recursive doubling, whose all-reduce zero 1 keeps.
TrainConfig configFor(const Case& c) {
  TrainConfig config;
  config.model = c.model == "gpt" ? ModelKind::kGpt : ModelKind::kMlp;
  config.hidden = {64};
  config.gpt = {.layers = 2, .heads = 2, .width = 64, .context = 16, .vocabulary = 97};
  config.optimizer = valueIn(kOptimizerNames, c.optimizer).value();
  config.momentum = 0.9;
  config.learningRate = c.optimizer == "sgd" ? 0.05 : 0.002;
  config.weightDecay = c.optimizer == "adamw" ? 0.1 : 0;  // the GPT leaves its vectors undecayed
  config.batchSize = c.model == "gpt" ? 3 : 6;
  config.steps = 6;
  config.logEvery = 0;
  config.seed = 11;
  config.keep = 0;
  config.sigtermGraceSeconds = 0;
  useBackend(config, c.backend);
  config.exchange.fusionThresholdBytes = 64 << 10;
  config.exchange.overlap = c.variant != "nooverlap";
  if (c.variant == "accumulate") config.accumulateSteps = 2;
  if (c.variant == "fp16") config.exchange.compression = engine::Compression::kFloat16;
  if (c.variant == "bf16") config.exchange.compression = engine::Compression::kBFloat16;
  return config;
}

class ZeroExactness : public ::testing::TestWithParam<std::string> {};

// --zero 1 against --zero 0: the same parameters to the bit on every rank, and state for a shard
// only: the ranks' state bytes add up to the whole state, and each holds less than it.
TEST_P(ZeroExactness, ShardedOptimiserGivesTheUnshardedParametersToTheBit) {
  models::enableFlushToZero();
  const Case c = parse(GetParam());
  const Sources sources = c.model == "gpt" ? syntheticTokenWindows() : syntheticMnistLike();
  TrainConfig config = configFor(c);
  Trainer plain(config, *sources.train, *sources.test, quiet());
  const std::vector<float> initial = copyOf(plain.model().parameters());
  plain.run();
  config.zero = 1;
  Trainer sharded(config, *sources.train, *sources.test, quiet());
  const TrainingSummary summary = sharded.run();

  const auto expected = plain.model().parameters();
  const auto got = sharded.model().parameters();
  EXPECT_GT(relativeDifference(initial, expected), 1e-3) << "training did not move the weights";
  EXPECT_EQ(differingBits(got, expected), 0u)
      << "of " << got.size() << " parameters differ on rank "
      << testing::mpiEnvironment().worldRank();
  EXPECT_TRUE(summary.replicasIdentical);
  EXPECT_TRUE(ranksWithOtherParameters(got).empty());

  const auto wholeBytes = static_cast<std::int64_t>(plain.optimizerStateBytes());
  auto shardBytes = static_cast<std::int64_t>(sharded.optimizerStateBytes());
  if (testing::mpiEnvironment().worldSize() > 1) {
    EXPECT_LT(shardBytes, wholeBytes) << "rank " << testing::mpiEnvironment().worldRank();
  }
  MPI_Allreduce(MPI_IN_PLACE, &shardBytes, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(shardBytes, wholeBytes);
}

INSTANTIATE_TEST_SUITE_P(RingAndTuned, ZeroExactness,
                         ::testing::Values("mlp_sgd_ring", "mlp_adamw_ring", "gpt_sgd_ring",
                                           "gpt_adamw_ring", "mlp_adamw_tuned",
                                           "mlp_sgd_ring_nooverlap", "gpt_adamw_ring_accumulate",
                                           "mlp_sgd_ring_fp16", "gpt_adamw_ring_bf16"),
                         [](const auto& param) { return param.param; });

// Clipping takes the global norm from every rank's shard and one more all-reduce: a sum
// associated otherwise, so the parameters agree with --zero 0 to rounding, not to the bit.
TEST(ZeroClipping, AgreesWithTheUnshardedRunToRounding) {
  models::enableFlushToZero();
  const Sources sources = syntheticTokenWindows();
  TrainConfig config = configFor(parse("gpt_adamw_ring"));
  config.clipGradNorm = 0.05;  // small enough to clip at every step
  Trainer plain(config, *sources.train, *sources.test, quiet());
  plain.run();
  config.zero = 1;
  Trainer sharded(config, *sources.train, *sources.test, quiet());
  sharded.run();
  EXPECT_LE(relativeDifference(sharded.model().parameters(), plain.model().parameters()), 1e-5);
  EXPECT_TRUE(ranksWithOtherParameters(sharded.model().parameters()).empty());
}

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
  config.exchange.compression = compressionNamed(GetParam());
  Trainer trainer(config, *train, *test, quiet());
  const TrainingSummary summary = trainer.run();
  EXPECT_GE(summary.lastEvaluation.accuracy(), 0.95) << "compression " << GetParam();
  EXPECT_EQ(summary.lastEvaluation.samples, test->size()) << "every test sample counted once";
  EXPECT_TRUE(summary.replicasIdentical);
}

INSTANTIATE_TEST_SUITE_P(WireFormats, MnistCompression, ::testing::Values("none", "fp16", "bf16"),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace ringtrain::training
