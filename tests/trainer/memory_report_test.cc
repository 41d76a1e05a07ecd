// The memory report of a run under mpirun: every rank's parts as the model, the optimiser and the
// exchange hold them, a peak resident set that covers them, the line and the metrics.jsonl record.
#include "training/memory_report.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include <mpi.h>

#include "data/synthetic_token_dataset.h"
#include "models/flush_to_zero.h"
#include "storage/tensorboard_writer.h"
#include "tests/support/mpi_test_environment.h"
#include "training/batch_source.h"
#include "training/run_report.h"
#include "training/trainer.h"

namespace ringtrain::training {
namespace {

using ::testing::HasSubstr;

constexpr models::GptShape kShape = {
    .layers = 2, .heads = 4, .width = 64, .context = 64, .vocabulary = 512};
constexpr int kBatch = 4;
constexpr std::int64_t kFloat = sizeof(float);

struct Sources {
  std::unique_ptr<BatchSource> train, test;
};

Sources tokenWindows() {
  data::SyntheticTokenOptions tokens;
  tokens.vocabulary = kShape.vocabulary;
  tokens.context = kShape.context;
  tokens.size = 96;
  tokens.seed = 3;
  data::DatasetPair pair = data::makeSyntheticTokenPair(tokens, 8);
  return {classificationSource(std::move(pair.train)), classificationSource(std::move(pair.test))};
}

TrainConfig gpt(std::string_view backend) {
  TrainConfig config;
  config.model = ModelKind::kGpt;
  config.gpt = kShape;
  config.optimizer = OptimizerKind::kAdamW;
  config.learningRate = 1e-3;
  config.batchSize = kBatch;
  config.steps = 2;
  config.logEvery = 0;
  config.seed = 5;
  config.exchange.backend = valueIn(engine::kExchangeBackendNames, backend).value();
  return config;
}

TrainerEnvironment quiet(MPI_Comm comm = MPI_COMM_WORLD) {
  TrainerEnvironment environment;
  environment.comm = comm;
  environment.log = false;
  return environment;
}

// What forward must keep for backward, at the least: per block and position the 15 C values of
// ln_1, qkv, the attention output, x2, ln_2, c_fc's output and GELU's, and H T attention
// probabilities; then the logits and their gradient (V per position each).
std::int64_t activationsAtLeast() {
  const std::int64_t positions = kBatch * kShape.context;
  const std::int64_t block = 15 * kShape.width + kShape.heads * kShape.context;
  return kFloat * positions * (kShape.layers * block + 2 * kShape.vocabulary);
}

struct TrainedRun {
  TrainingSummary summary;
  std::int64_t parameters = 0;      // the model's count
  std::int64_t optimizerBytes = 0;  // this rank's Optimizer::state(), summed
};

TrainedRun train(const TrainConfig& config, MPI_Comm comm, storage::TrainingLog* log = nullptr) {
  const Sources sources = tokenWindows();
  TrainerEnvironment environment = quiet(comm);
  environment.trainingLog = log;
  Trainer trainer(config, *sources.train, *sources.test, environment);
  TrainedRun run;
  run.summary = trainer.run();
  run.parameters = static_cast<std::int64_t>(trainer.model().parameterCount());
  for (const std::span<float> state : trainer.optimizerState())
    run.optimizerBytes += static_cast<std::int64_t>(state.size_bytes());
  return run;
}

// The parts every backend shares, for each rank's account.
void expectModelParts(const TrainedRun& run, int ranks) {
  ASSERT_EQ(run.summary.memory.size(), static_cast<std::size_t>(ranks));
  const std::int64_t parameterBytes = kFloat * run.parameters;
  // AdamW's two moments, whole on every rank.
  EXPECT_EQ(run.optimizerBytes, 2 * parameterBytes);
  for (std::size_t r = 0; r < run.summary.memory.size(); ++r) {
    const MemoryAccount& a = run.summary.memory[r];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(a.parameters, parameterBytes);
    // The flat buffer's, and the tied head's own V x C gradient.
    EXPECT_EQ(a.gradients, parameterBytes + kFloat * kShape.vocabulary * kShape.width);
    EXPECT_EQ(a.optimizerState, run.optimizerBytes);
    EXPECT_GE(a.activations, activationsAtLeast());
    EXPECT_EQ(a.averagedGradients, ranks > 1 ? parameterBytes : 0);
    // The process touched every private part in the steps: its peak holds them.
    EXPECT_GE(a.peakResident, a.accounted() - a.communicationBuffers);
    // And the accounting is not far off: what is left is the program, its libraries and data.
    EXPECT_LT(a.peakResident - a.accounted(), std::int64_t{512} << 20);
  }
}

class MemoryOfARun : public ::testing::TestWithParam<std::string> {};

TEST_P(MemoryOfARun, EveryRanksPartsAndItsPeak) {
  models::enableFlushToZero();
  const int ranks = testing::mpiEnvironment().worldSize();
  const TrainedRun run = train(gpt(GetParam()), MPI_COMM_WORLD);
  expectModelParts(run, ranks);
  for (const MemoryAccount& a : run.summary.memory) {
    if (GetParam() == "ring") {
      EXPECT_EQ(a.communicationBuffers, 0) << "no compression, no staging";
    } else if (ranks > 1) {
      // The shared window holds every other rank's gradients too.
      EXPECT_GE(a.communicationBuffers, (ranks - 1) * kFloat * run.parameters);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MemoryOfARun, ::testing::Values("ring", "shm"),
                         [](const auto& param) { return param.param; });

// Alone, a rank averages in place: no second gradient buffer.
TEST(MemoryOfARun, OneRankAveragesInPlace) {
  models::enableFlushToZero();
  expectModelParts(train(gpt("ring"), MPI_COMM_SELF), 1);
}

// Compression stages each bucket at 16 bits: half the gradients' bytes at least.
TEST(MemoryOfARun, CompressionStagesTheBuckets) {
  models::enableFlushToZero();
  const int ranks = testing::mpiEnvironment().worldSize();
  TrainConfig config = gpt("ring");
  config.exchange.compression = engine::Compression::kBFloat16;
  const TrainedRun run = train(config, MPI_COMM_WORLD);
  ASSERT_EQ(run.summary.memory.size(), static_cast<std::size_t>(ranks));
  for (const MemoryAccount& a : run.summary.memory)
    EXPECT_GE(a.communicationBuffers, kFloat * run.parameters / 2);
}

// Rank 0's report line names every part and every rank's peak; --logdir's metrics.jsonl holds
// the parts in bytes.
TEST(MemoryOfARun, TheLineAndTheMetricsRecord) {
  models::enableFlushToZero();
  const bool root = testing::mpiEnvironment().worldRank() == 0;
  const std::filesystem::path logdir =
      std::filesystem::temp_directory_path() / ("memory_report_" + std::to_string(getpid()));
  TrainedRun run;
  {
    std::optional<storage::TrainingLog> log;
    if (root) log.emplace(logdir);
    run = train(gpt("ring"), MPI_COMM_WORLD, log ? &*log : nullptr);
  }
  const std::string line = memoryLine(run.summary.memory);
  for (const char* part :
       {"parameters ", "gradients ", "averaged gradients ", "optimiser state ", "activations ",
        "communication buffers ", "accounted ", "peak resident "})
    EXPECT_THAT(line, HasSubstr(part));
  const auto mib = [](std::int64_t bytes) {
    return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20));
  };
  EXPECT_THAT(line, HasSubstr("parameters " + mib(kFloat * run.parameters) + ","));
  for (const MemoryAccount& a : run.summary.memory)
    EXPECT_THAT(line, HasSubstr(mib(a.peakResident)));
  EXPECT_THAT(runReport(run.summary, gpt("ring"), {}), ::testing::Contains(line));
  if (!root) return;
  std::ifstream metrics(logdir / "metrics.jsonl");
  std::optional<nlohmann::json> memory;
  for (std::string text; std::getline(metrics, text);) {
    const nlohmann::json record = nlohmann::json::parse(text);
    if (record["split"] == "memory") memory = record;
  }
  std::filesystem::remove_all(logdir);
  ASSERT_TRUE(memory.has_value()) << "no memory line in metrics.jsonl";
  EXPECT_EQ((*memory)["step"], 2);
  EXPECT_EQ((*memory)["parameters_bytes"].get<double>(), kFloat * run.parameters);
  EXPECT_EQ((*memory)["optimizer_state_bytes"].get<double>(), 2 * kFloat * run.parameters);
  EXPECT_GE((*memory)["peak_resident_bytes"].get<double>(),
            (*memory)["peak_resident_bytes_min"].get<double>());
  EXPECT_GT((*memory)["peak_resident_bytes_min"].get<double>(), 0);
}

// One more block adds what it keeps and its two arena regions (output and output gradient), and
// nothing of the scratch the blocks share: a shared workspace is counted once. What it keeps holds
// no attention probabilities (H·T per position): backward recomputes them.
TEST(ModelMemory, ABlockMoreAddsItsOwnWorkspacesOnly) {
  const auto activations = [](models::Index layers) {
    models::ModelSpec spec{.name = "gpt", .input = {1, kShape.context, 1}};
    spec.gpt = kShape;
    spec.gpt.layers = layers;
    models::Model<float> model = models::makeModel<float>(spec);
    model.reserve(kBatch);
    return static_cast<std::int64_t>(model.activationBytes());
  };
  const std::int64_t positions = kBatch * kShape.context;
  const std::int64_t kept = positions * (15 * kShape.width + 4);
  const std::int64_t arenas = 2 * kShape.width * positions;
  EXPECT_EQ(activations(3) - activations(2), kFloat * (kept + arenas));
  EXPECT_EQ(activations(2) - activations(1), kFloat * (kept + arenas));
}

// memoryLine takes each part's largest over the ranks, and lists the peaks by rank.
TEST(MemoryLine, LargestPartsAndThePeakOfEveryRank) {
  MemoryAccount a, b;
  a.parameters = b.parameters = 4 << 20;
  a.optimizerState = 3 << 20;
  b.optimizerState = 5 << 20;
  a.peakResident = 100 << 20;
  b.peakResident = 120 << 20;
  const MemoryAccount both[] = {a, b};
  EXPECT_EQ(memoryLine(both),
            "memory per rank, MiB (the largest of the ranks): parameters 4.0, gradients 0.0, "
            "averaged gradients 0.0, optimiser state 5.0, activations 0.0, communication "
            "buffers 0.0; accounted 9.0; peak resident 120.0 (by rank: 100.0, 120.0)");
  EXPECT_EQ(memoryLine({}), "");
}

}  // namespace
}  // namespace ringtrain::training
