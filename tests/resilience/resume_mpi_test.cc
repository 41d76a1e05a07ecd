// Checkpoints and resume under mpirun, with the real Trainer: a run resumed from step k holds at
// step 2k the same bits as one that never stopped; a checkpoint resumed on another number of
// ranks continues (re-sharded, and with --on-resize keep-global-batch as the old run would have,
// up to floating-point reassociation); damaged checkpoints and checkpoints of another model are
// refused on every rank with one message, and --resume auto falls back to the newest good one,
// saying so; a --zero 1 checkpoint resumes with --zero 0 and on another rank count exactly, and
// the other way round; the TensorBoard files of a real run decode to the scalars it logged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include <mpi.h>

#include "base/fingerprint.h"
#include "data/synthetic_dataset.h"
#include "data/synthetic_token_dataset.h"
#include "models/flush_to_zero.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_model.h"
#include "tests/storage/event_file_reader.h"
#include "tests/support/mpi_test_environment.h"
#include "training/batch_source.h"
#include "training/trainer.h"

namespace ringtrain::training {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Sources {
  std::unique_ptr<BatchSource> train, test;
};

// 960 samples: divisible by 1 to 4 ranks and by the global batch 12, so no rank count skips a
// sample and keep-global-batch sees the same samples at every step.
Sources syntheticData() {
  data::SyntheticOptions o;
  o.size = 960;
  o.seed = 7;
  data::DatasetPair pair = data::makeSyntheticPair(o, 96);
  return {classificationSource(std::move(pair.train)), classificationSource(std::move(pair.test))};
}

// The GPT's token windows: 96, divisible as above.
Sources syntheticTokens() {
  data::SyntheticTokenOptions o;
  o.vocabulary = 97;
  o.context = 16;
  o.size = 96;
  o.seed = 7;
  data::DatasetPair pair = data::makeSyntheticTokenPair(o, 8);
  return {classificationSource(std::move(pair.train)), classificationSource(std::move(pair.test))};
}

int worldRank() {
  return testing::mpiEnvironment().worldRank();
}
int worldSize() {
  return testing::mpiEnvironment().worldSize();
}

// A folder every rank names alike: rank 0 makes it and broadcasts its name, and removes it.
class SharedFolder {
 public:
  SharedFolder() {
    std::string name(256, '\0');
    if (worldRank() == 0) {
      std::string pattern = (fs::temp_directory_path() / "ringtrain_resume_XXXXXX").string();
      if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
      name.replace(0, pattern.size(), pattern);
    }
    MPI_Bcast(name.data(), static_cast<int>(name.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = name.c_str();
  }
  ~SharedFolder() {
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ignored;
    if (worldRank() == 0) fs::remove_all(path_, ignored);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

TrainerEnvironment quiet(MPI_Comm comm = MPI_COMM_WORLD,
                         storage::TrainingLog* trainingLog = nullptr) {
  TrainerEnvironment environment;
  environment.comm = comm;
  environment.log = false;
  environment.trainingLog = trainingLog;
  return environment;
}

TrainConfig smallConfig() {
  TrainConfig config;
  config.model = ModelKind::kMlp;
  config.hidden = {32};
  config.gpt = {.layers = 2, .heads = 2, .width = 16, .context = 16, .vocabulary = 97};
  config.optimizer = OptimizerKind::kSgd;
  config.momentum = 0.9;
  config.learningRate = 0.05;
  config.batchSize = 6;
  config.steps = 24;
  config.logEvery = 0;
  config.seed = 11;
  config.keep = 0;
  config.sigtermGraceSeconds = 0;
  return config;
}

std::vector<float> copyOf(std::span<const float> values) {
  return {values.begin(), values.end()};
}

bool sameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

double relativeDifference(std::span<const float> a, std::span<const float> b) {
  double difference = 0;
  double norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    norm += double{b[i]} * b[i];
  }
  return std::sqrt(difference / norm);
}

// Whether every rank of `comm` holds these bits.
bool sameOnEveryRank(std::span<const float> values, MPI_Comm comm) {
  const std::uint64_t mine = fingerprint(values.data(), values.size_bytes());
  std::uint64_t range[2] = {mine, ~mine};
  MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UINT64_T, MPI_MIN, comm);
  return range[0] == ~range[1];
}

class ExactResume : public ::testing::TestWithParam<std::string> {};

// Stopped at step 12 (its checkpoint) and resumed in a new trainer, the run holds at step 24 the
// very bits -- parameters, optimiser state and step count -- of the run that never stopped.
// "...-accumulate": 3 micro-batches a step; checkpoints are written between optimiser steps, so
// the resumed run starts at a step's first micro-batch, and the MLP's steps cross an epoch's end.
TEST_P(ExactResume, ResumedAtStepKTheRunEqualsTheUninterruptedOneToTheBitAtStep2K) {
  models::enableFlushToZero();
  // "gpt": the GPT with AdamW, weight decay on its matrices and gradient clipping.
  const std::string param = GetParam();
  const bool accumulate = param.ends_with("-accumulate");
  const std::string optimizer = param.substr(0, param.find('-'));
  const bool gpt = optimizer == "gpt";
  const Sources sources = gpt ? syntheticTokens() : syntheticData();
  SharedFolder folder;
  TrainConfig config = smallConfig();
  config.model = gpt ? ModelKind::kGpt : ModelKind::kMlp;
  config.optimizer = gpt ? OptimizerKind::kAdamW : valueIn(kOptimizerNames, optimizer).value();
  config.learningRate = optimizer == "sgd" ? 0.05 : 0.002;
  if (accumulate) {
    config.accumulateSteps = 3;
    // The MLP's epoch of 960 / ranks samples ends in a smaller batch, inside a step.
    config.batchSize = gpt ? 2 : 7;
  }
  config.weightDecay = gpt ? 0.1 : 0;
  config.clipGradNorm = gpt ? 1.0 : 0;
  config.checkpointEvery = 12;

  TrainConfig whole = config;
  whole.checkpointDir = (folder / "whole").string();
  Trainer uninterrupted(whole, *sources.train, *sources.test, quiet());
  uninterrupted.resume();
  uninterrupted.run();

  TrainConfig second = config;
  second.checkpointDir = (folder / "resumed").string();
  second.resume = (folder / "whole" / storage::checkpointFileName(12)).string();
  Trainer resumed(second, *sources.train, *sources.test, quiet());
  resumed.resume();
  EXPECT_EQ(resumed.firstStep(), 12);
  const TrainingSummary summary = resumed.run();
  EXPECT_EQ(summary.steps, 12);
  EXPECT_EQ(summary.lastStep, 24);

  EXPECT_TRUE(sameBits(resumed.model().parameters(), uninterrupted.model().parameters()))
      << "parameters differ by "
      << relativeDifference(resumed.model().parameters(), uninterrupted.model().parameters());
  const auto expectedState = uninterrupted.optimizerState();
  const auto gotState = resumed.optimizerState();
  ASSERT_EQ(gotState.size(), expectedState.size());
  for (std::size_t i = 0; i < gotState.size(); ++i)
    EXPECT_TRUE(sameBits(gotState[i], expectedState[i])) << "optimiser state " << i;
  EXPECT_EQ(resumed.optimizer().steps(), uninterrupted.optimizer().steps());
  EXPECT_TRUE(sameOnEveryRank(resumed.model().parameters(), MPI_COMM_WORLD));

  // The two final checkpoints hold the same tensors.
  if (worldRank() == 0) {
    const auto a = storage::readCheckpoint(folder / "whole" / storage::checkpointFileName(24));
    const auto b = storage::readCheckpoint(folder / "resumed" / storage::checkpointFileName(24));
    ASSERT_EQ(a.parameters.size(), b.parameters.size());
    for (std::size_t i = 0; i < a.parameters.size(); ++i) {
      EXPECT_EQ(a.parameters[i].name, b.parameters[i].name);
      EXPECT_TRUE(sameBits(a.parameters[i].values, b.parameters[i].values)) << a.parameters[i].name;
    }
    EXPECT_EQ(a.sampler, b.sampler);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ExactResume,
                         ::testing::Values("sgd", "adam", "gpt", "sgd-accumulate",
                                           "gpt-accumulate"),
                         [](const auto& param) {
                           std::string name = param.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// --epochs with --accumulate-steps: the resumed run plans the steps the uninterrupted one had
// (the micro-batches left, 3 to a step, rounded up) and ends with its bits.
TEST(AccumulatedResume, OverEpochsPlansTheSameStepsAndEndsWithTheSameBits) {
  const Sources sources = syntheticData();
  SharedFolder folder;
  TrainConfig config = smallConfig();
  config.steps = 0;
  config.epochs = 2;
  config.batchSize = 7;  // 960 / ranks samples: epochs end in a smaller batch, inside a step
  config.accumulateSteps = 3;
  config.checkpointEvery = 10;
  const std::int64_t perEpoch = (960 / worldSize() + 6) / 7;

  TrainConfig whole = config;
  whole.checkpointDir = (folder / "whole").string();
  Trainer uninterrupted(whole, *sources.train, *sources.test, quiet());
  EXPECT_EQ(uninterrupted.plannedSteps(), (2 * perEpoch + 2) / 3);
  uninterrupted.resume();
  uninterrupted.run();

  TrainConfig second = config;
  second.checkpointDir = (folder / "resumed").string();
  second.resume = (folder / "whole" / storage::checkpointFileName(10)).string();
  Trainer resumed(second, *sources.train, *sources.test, quiet());
  resumed.resume();
  EXPECT_EQ(resumed.firstStep(), 10);
  EXPECT_EQ(resumed.plannedSteps(), uninterrupted.plannedSteps());
  resumed.run();
  EXPECT_TRUE(sameBits(resumed.model().parameters(), uninterrupted.model().parameters()));
}

// A job grows by one rank: W-1 ranks with batch 12/(W-1) checkpoint at step 12; W ranks resume
// it with keep-global-batch (batch 12/W) and reach at step 24 what the W-1 ranks reached
// uninterrupted, to floating-point reassociation.
class ResumeOnAnotherRankCount : public ::testing::TestWithParam<std::string> {};

TEST_P(ResumeOnAnotherRankCount, AJobThatGrowsByOneRankKeepsTheGlobalBatch) {
  if (worldSize() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  models::enableFlushToZero();
  const bool gpt = GetParam() == "gpt";
  const Sources sources = gpt ? syntheticTokens() : syntheticData();
  SharedFolder folder;
  const int before = worldSize() - 1;
  MPI_Comm fewer = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, worldRank() < before ? 0 : MPI_UNDEFINED, worldRank(), &fewer);

  TrainConfig config = smallConfig();
  config.model = gpt ? ModelKind::kGpt : ModelKind::kMlp;
  config.checkpointDir = (folder / "fewer").string();
  config.checkpointEvery = 12;
  std::vector<float> reference;
  if (fewer != MPI_COMM_NULL) {
    TrainConfig small = config;
    small.batchSize = 12 / before;
    Trainer uninterrupted(small, *sources.train, *sources.test, quiet(fewer));
    uninterrupted.resume();
    uninterrupted.run();
    reference = copyOf(uninterrupted.model().parameters());
    MPI_Comm_free(&fewer);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  TrainConfig grown = config;
  grown.batchSize = 12 / before;  // the command line of the smaller job, unchanged
  grown.checkpointDir = (folder / "grown").string();
  grown.resume = (folder / "fewer" / storage::checkpointFileName(12)).string();
  Trainer resumed(grown, *sources.train, *sources.test, quiet());
  resumed.resume();
  EXPECT_EQ(resumed.batchSize(), 12 / worldSize());
  EXPECT_EQ(resumed.firstStep(), 12);
  EXPECT_EQ(resumed.plannedSteps(), 24);
  EXPECT_DOUBLE_EQ(resumed.baseLearningRate(), 0.05);
  const TrainingSummary summary = resumed.run();
  EXPECT_TRUE(summary.replicasIdentical);
  if (worldRank() == 0) {
    EXPECT_LE(relativeDifference(resumed.model().parameters(), reference), 1e-5)
        << worldSize() << " ranks resumed from " << before << " rank(s)";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ResumeOnAnotherRankCount, ::testing::Values("mlp", "gpt"),
                         [](const auto& param) { return param.param; });

class ZeroCheckpoints : public ::testing::TestWithParam<std::string> {};

// Two ranks train 12 steps on the ring with --zero 0 and with --zero 1, checkpointing at step 6:
// the two checkpoints hold the same parameters and optimiser state, bit for bit. Resumed from
// either at step 6 with either setting, on 2 ranks the run ends with the uninterrupted run's
// bits; on every rank of the job (under mpirun -np 3 a job that grew from 2 ranks, keeping the
// global batch) the four resumptions end with the same bits.
TEST_P(ZeroCheckpoints, ResumeAcrossZeroSettingsAndRankCountsToTheBit) {
  models::enableFlushToZero();
  const bool gpt = GetParam() == "gpt";
  const Sources sources = gpt ? syntheticTokens() : syntheticData();
  SharedFolder folder;
  TrainConfig config = smallConfig();
  config.model = gpt ? ModelKind::kGpt : ModelKind::kMlp;
  config.optimizer = gpt ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
  config.learningRate = gpt ? 0.002 : 0.05;
  config.weightDecay = gpt ? 0.1 : 0;
  // Buckets for the ring and for recursive doubling (at most 32 KiB) alike.
  config.gpt.width = 64;
  config.exchange.fusionThresholdBytes = 64 << 10;
  config.exchange.backend = engine::ExchangeBackend::kRing;
  config.steps = 12;
  config.checkpointEvery = 6;
  const auto run = [&](int zero, const std::string& out, const std::string& from, MPI_Comm comm) {
    TrainConfig c = config;
    c.zero = zero;
    if (!out.empty()) c.checkpointDir = (folder / out).string();
    if (!from.empty()) c.resume = (folder / from / storage::checkpointFileName(6)).string();
    Trainer trainer(c, *sources.train, *sources.test, quiet(comm));
    trainer.resume();
    EXPECT_EQ(trainer.firstStep(), from.empty() ? 0 : 6);
    trainer.run();
    EXPECT_TRUE(sameOnEveryRank(trainer.model().parameters(), comm));
    return copyOf(trainer.model().parameters());
  };
  MPI_Comm two = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, worldRank() < 2 ? 0 : MPI_UNDEFINED, worldRank(), &two);
  std::vector<float> uninterrupted;
  if (two != MPI_COMM_NULL) {
    uninterrupted = run(0, "plain", "", two);
    EXPECT_TRUE(sameBits(run(1, "sharded", "", two), uninterrupted));
    EXPECT_TRUE(sameBits(run(0, "", "sharded", two), uninterrupted)) << "--zero 0 from --zero 1";
    EXPECT_TRUE(sameBits(run(1, "", "plain", two), uninterrupted)) << "--zero 1 from --zero 0";
    MPI_Comm_free(&two);
  }
  if (worldRank() == 0) {
    const auto a = storage::readCheckpoint(folder / "plain" / storage::checkpointFileName(6));
    const auto b = storage::readCheckpoint(folder / "sharded" / storage::checkpointFileName(6));
    ASSERT_EQ(a.parameters.size(), b.parameters.size());
    for (std::size_t i = 0; i < a.parameters.size(); ++i)
      EXPECT_TRUE(sameBits(a.parameters[i].values, b.parameters[i].values));
    ASSERT_EQ(a.optimizerState.size(), b.optimizerState.size());
    ASSERT_FALSE(a.optimizerState.empty());
    for (std::size_t i = 0; i < a.optimizerState.size(); ++i) {
      EXPECT_TRUE(sameBits(a.optimizerState[i].values, b.optimizerState[i].values))
          << a.optimizerState[i].name;
    }
    EXPECT_EQ(a.optimizerSteps, b.optimizerSteps);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  const std::vector<float> reference = run(0, "", "plain", MPI_COMM_WORLD);
  EXPECT_TRUE(sameBits(run(1, "", "plain", MPI_COMM_WORLD), reference)) << worldSize() << " ranks";
  EXPECT_TRUE(sameBits(run(0, "", "sharded", MPI_COMM_WORLD), reference))
      << worldSize() << " ranks";
  EXPECT_TRUE(sameBits(run(1, "", "sharded", MPI_COMM_WORLD), reference))
      << worldSize() << " ranks";
  if (worldSize() == 2) {
    EXPECT_TRUE(sameBits(reference, uninterrupted));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ZeroCheckpoints, ::testing::Values("mlp", "gpt"),
                         [](const auto& param) { return param.param; });

// A job shrinks to one rank: W ranks checkpoint at step 12; rank 0 alone resumes with
// keep-per-rank-batch, its batch unchanged, the learning rate divided by W and the position in
// the epoch carried over as samples seen.
TEST(ResumeOnFewerRanks, AJobThatShrinksToOneRankKeepsThePerRankBatchAndScalesTheLr) {
  if (worldSize() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  models::enableFlushToZero();
  const Sources sources = syntheticData();
  SharedFolder folder;
  TrainConfig config = smallConfig();
  config.batchSize = 4;
  config.checkpointDir = (folder / "all").string();
  config.checkpointEvery = 12;
  {
    Trainer all(config, *sources.train, *sources.test, quiet());
    all.resume();
    all.run();
  }
  if (worldRank() == 0) {
    TrainConfig alone = config;
    alone.checkpointDir = (folder / "alone").string();
    alone.resume = (folder / "all" / storage::checkpointFileName(12)).string();
    alone.onResize = OnResize::kKeepPerRankBatch;
    Trainer resumed(alone, *sources.train, *sources.test, quiet(MPI_COMM_SELF));
    resumed.resume();
    EXPECT_EQ(resumed.batchSize(), 4);
    EXPECT_DOUBLE_EQ(resumed.baseLearningRate(), 0.05 / worldSize());
    EXPECT_EQ(resumed.firstStep(), 12);
    const TrainingSummary summary = resumed.run();
    EXPECT_EQ(summary.lastStep, 24);
    EXPECT_TRUE(std::isfinite(summary.lastEvaluation.meanLoss()));
    // The final checkpoint records the new layout: 1 rank, and 12 steps of 4 after 12 x 4W
    // samples of epoch 0.
    const auto saved = storage::readCheckpoint(folder / "alone" / storage::checkpointFileName(24));
    EXPECT_EQ(saved.worldSize, 1);
    EXPECT_EQ(saved.sampler, (data::SamplerPosition{0, 12 * worldSize() + 12}));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// What resume() throws, the same on every rank, or "" when it resumed.
std::string refusalOf(const TrainConfig& config, const Sources& sources) {
  Trainer trainer(config, *sources.train, *sources.test, quiet());
  std::string message;
  try {
    trainer.resume();
  } catch (const ResumeRefused& e) {
    message = e.what();
  }
  const std::uint64_t mine = fingerprint(message.data(), message.size());
  std::uint64_t range[2] = {mine, ~mine};
  MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(range[0], ~range[1]) << "ranks were told different things: " << message;
  return message;
}

void flipByte(const fs::path& file, std::uintmax_t offset) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekg(static_cast<std::streamoff>(offset));
  const char byte = static_cast<char>(stream.get() ^ 0x20);
  stream.seekp(static_cast<std::streamoff>(offset));
  stream.put(byte);
}

TEST(ResumeRefusals, DamagedCheckpointsAndOtherModelsAreRefusedAndAutoFallsBack) {
  models::enableFlushToZero();
  const Sources sources = syntheticData();
  SharedFolder folder;
  TrainConfig config = smallConfig();
  config.checkpointDir = (folder / "ck").string();
  config.checkpointEvery = 8;
  {
    Trainer trainer(config, *sources.train, *sources.test, quiet());
    trainer.resume();
    trainer.run();  // checkpoints at 8, 16 and 24
  }
  const fs::path newest = folder / "ck" / storage::checkpointFileName(24);
  const fs::path older = folder / "ck" / storage::checkpointFileName(16);
  if (worldRank() == 0) {
    flipByte(newest, fs::file_size(newest) / 2);
    fs::copy_file(older, folder / "truncated.h5");
    fs::resize_file(folder / "truncated.h5", fs::file_size(older) - 100);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  TrainConfig path = config;
  path.checkpointDir = (folder / "elsewhere").string();
  path.resume = newest.string();
  EXPECT_THAT(refusalOf(path, sources),
              ::testing::AllOf(HasSubstr(newest.string()), HasSubstr("checksum mismatch")));
  path.resume = (folder / "truncated.h5").string();
  EXPECT_THAT(refusalOf(path, sources), HasSubstr("truncated"));
  TrainConfig otherModel = path;
  otherModel.hidden = {16};
  otherModel.resume = older.string();
  EXPECT_THAT(refusalOf(otherModel, sources), HasSubstr("saved from another model layout"));
  TrainConfig otherOptimizer = path;
  otherOptimizer.optimizer = OptimizerKind::kAdam;
  otherOptimizer.resume = older.string();
  EXPECT_THAT(refusalOf(otherOptimizer, sources), HasSubstr("optimiser state of sgd"));
  // Starting afresh, or from an older checkpoint, in a folder of newer checkpoints.
  TrainConfig fresh = config;
  EXPECT_THAT(refusalOf(fresh, sources), HasSubstr("already holds checkpoints up to step 24"));
  fresh.resume = older.string();
  EXPECT_THAT(refusalOf(fresh, sources), HasSubstr("newer than this run's start at step 16"));

  // --resume auto skips the damaged step 24 for step 16, and says so.
  TrainConfig automatic = config;
  automatic.resume = "auto";
  if (worldRank() == 0) ::testing::internal::CaptureStdout();
  Trainer trainer(automatic, *sources.train, *sources.test);
  trainer.resume();
  if (worldRank() == 0) {
    const std::string log = ::testing::internal::GetCapturedStdout();
    EXPECT_THAT(log, HasSubstr("resuming from " + older.string() + " (step 16"));
    EXPECT_THAT(log, HasSubstr("skipped " + newest.string() + ": checksum mismatch"));
  }
  EXPECT_EQ(trainer.firstStep(), 16);
}

// A newer checkpoint written with another optimiser (another run's, in the same folder) is passed
// over by --resume auto for the newest one this run can continue from, and the model holds that
// one's parameters; named as a file, it is refused.
TEST(ResumeRefusals, AutoPassesOverACheckpointOfAnotherOptimiser) {
  models::enableFlushToZero();
  const Sources sources = syntheticData();
  SharedFolder folder;
  TrainConfig config = smallConfig();  // sgd
  config.checkpointDir = (folder / "ck").string();
  config.checkpointEvery = 8;
  config.steps = 16;
  {
    Trainer trainer(config, *sources.train, *sources.test, quiet());
    trainer.resume();
    trainer.run();  // checkpoints at 8 and 16
  }
  TrainConfig adam = config;
  adam.optimizer = OptimizerKind::kAdam;
  adam.checkpointDir = (folder / "adam").string();
  adam.steps = 24;
  {
    Trainer trainer(adam, *sources.train, *sources.test, quiet());
    trainer.resume();
    trainer.run();
  }
  const fs::path usable = folder / "ck" / storage::checkpointFileName(16);
  const fs::path otherOptimizer = folder / "ck" / storage::checkpointFileName(24);
  if (worldRank() == 0) {
    fs::copy_file(folder / "adam" / storage::checkpointFileName(24), otherOptimizer);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  TrainConfig automatic = config;
  automatic.resume = "auto";
  automatic.steps = 24;
  if (worldRank() == 0) ::testing::internal::CaptureStdout();
  Trainer trainer(automatic, *sources.train, *sources.test);
  trainer.resume();
  if (worldRank() == 0) {
    const std::string log = ::testing::internal::GetCapturedStdout();
    EXPECT_THAT(log, HasSubstr("resuming from " + usable.string() + " (step 16"));
    EXPECT_THAT(log, HasSubstr("skipped " + otherOptimizer.string() +
                               ": optimiser state of adam but this run uses sgd"));
    std::vector<float> saved(trainer.model().parameters().size());
    storage::copyTensorsToFlat(storage::readCheckpoint(usable).parameters,
                               trainer.model().parameterTable(), std::span<float>(saved), usable);
    EXPECT_TRUE(sameBits(trainer.model().parameters(), saved));
  }
  EXPECT_EQ(trainer.firstStep(), 16);
  EXPECT_TRUE(sameOnEveryRank(trainer.model().parameters(), MPI_COMM_WORLD));

  TrainConfig named = config;
  named.checkpointDir = (folder / "elsewhere").string();
  named.resume = otherOptimizer.string();
  EXPECT_THAT(refusalOf(named, sources),
              HasSubstr("optimiser state of adam but this run uses sgd"));
}

// The files of a folder, sorted by name.
std::vector<fs::path> filesIn(const fs::path& folder) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder))
    files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The TensorBoard files of a real run, decoded independently: train/ holds loss, accuracy,
// learning rate, samples per second and all-reduce time at every logged step, test/ the test
// loss and accuracy at every evaluation, with metrics.jsonl's values; a resumed run marks its
// start with a SessionLog START.
TEST(TrainingLogOfARun, EventFilesDecodeToTheLoggedScalars) {
  models::enableFlushToZero();
  const Sources sources = syntheticData();
  SharedFolder folder;
  TrainConfig config = smallConfig();
  config.steps = 30;
  config.logEvery = 10;
  config.evalEvery = 15;
  config.checkpointDir = (folder / "ck").string();
  config.checkpointEvery = 15;
  TrainingSummary summary;
  {
    std::optional<storage::TrainingLog> log;
    if (worldRank() == 0) log.emplace(folder / "logs");
    Trainer trainer(config, *sources.train, *sources.test,
                    quiet(MPI_COMM_WORLD, log ? &*log : nullptr));
    trainer.resume();
    summary = trainer.run();
  }
  if (worldRank() == 0) {
    const std::vector<fs::path> trainFiles = filesIn(folder / "logs/train");
    ASSERT_EQ(trainFiles.size(), 1u);
    const auto records = storage::testing::readRecords(trainFiles[0]);
    ASSERT_EQ(records.size(), 4u) << "the file version and steps 10, 20, 30";
    std::ifstream metricsFile(folder / "logs/metrics.jsonl");
    std::vector<nlohmann::json> metrics;
    for (std::string line; std::getline(metricsFile, line);)
      metrics.push_back(nlohmann::json::parse(line));
    std::vector<nlohmann::json> trainMetrics;
    for (const auto& line : metrics) {
      if (line["split"] == "train") trainMetrics.push_back(line);
    }
    ASSERT_EQ(trainMetrics.size(), 3u);
    LrScheduleOptions schedule;
    schedule.kind = config.lrSchedule;
    schedule.baseLr = config.learningRate;
    schedule.totalSteps = config.steps;
    const std::regex pair(R"re(1: "(\w+)"\n\s+2: (0x[0-9a-f]{8}))re");
    for (int i = 1; i <= 3; ++i) {
      const std::string text = storage::testing::decodeRaw(records[static_cast<std::size_t>(i)],
                                                           folder / "record.bin", RINGTRAIN_PROTOC);
      EXPECT_THAT(text, HasSubstr("\n2: " + std::to_string(10 * i) + "\n"));
      std::vector<std::string> tags;
      for (std::sregex_iterator it(text.begin(), text.end(), pair), end; it != end; ++it) {
        const std::string tag = (*it)[1];
        tags.push_back(tag);
        const nlohmann::json& line = trainMetrics[static_cast<std::size_t>(i - 1)];
        EXPECT_EQ(line["step"], 10 * i);
        EXPECT_EQ((*it)[2], storage::testing::floatBits(line[tag].get<float>()))
            << tag << " at step " << 10 * i;
        if (tag == "learning_rate") {
          EXPECT_EQ((*it)[2], storage::testing::floatBits(
                                  static_cast<float>(learningRateAt(schedule, 10 * i - 1))));
        }
      }
      EXPECT_THAT(tags, ::testing::ElementsAre("loss", "accuracy", "learning_rate",
                                               "samples_per_second", "allreduce_ms"));
    }
    const std::vector<fs::path> testFiles = filesIn(folder / "logs/test");
    ASSERT_EQ(testFiles.size(), 1u);
    const auto testRecords = storage::testing::readRecords(testFiles[0]);
    ASSERT_EQ(testRecords.size(), 3u) << "the file version and steps 15, 30";
    const std::string last =
        storage::testing::decodeRaw(testRecords[2], folder / "record.bin", RINGTRAIN_PROTOC);
    EXPECT_THAT(last, HasSubstr("\n2: 30\n"));
    EXPECT_THAT(
        last, HasSubstr("1: \"accuracy\"\n    2: " + storage::testing::floatBits(static_cast<float>(
                                                         summary.lastEvaluation.accuracy()))));
  }

  // Resumed at step 15 into the same folder: the new files start with a SessionLog START there.
  TrainConfig again = config;
  again.checkpointDir = (folder / "again").string();
  again.resume = (folder / "ck" / storage::checkpointFileName(15)).string();
  {
    std::optional<storage::TrainingLog> log;
    if (worldRank() == 0) log.emplace(folder / "logs");
    Trainer trainer(again, *sources.train, *sources.test,
                    quiet(MPI_COMM_WORLD, log ? &*log : nullptr));
    trainer.resume();
    trainer.run();
  }
  if (worldRank() == 0) {
    const std::vector<fs::path> files = filesIn(folder / "logs/train");
    ASSERT_EQ(files.size(), 2u);
    const auto records = storage::testing::readRecords(files[1]);
    ASSERT_GE(records.size(), 2u);
    EXPECT_THAT(storage::testing::decodeRaw(records[1], folder / "record.bin", RINGTRAIN_PROTOC),
                HasSubstr("\n2: 15\n7 {\n  1: 1\n}"));
    std::ifstream metricsFile(folder / "logs/metrics.jsonl");
    std::string all((std::istreambuf_iterator<char>(metricsFile)), {});
    EXPECT_THAT(all, HasSubstr("\"resumed_at_step\":15"));
  }
}

}  // namespace
}  // namespace ringtrain::training
