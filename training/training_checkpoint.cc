#include "training/training_checkpoint.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <string_view>

#include "data/random.h"
#include "storage/checkpoint_model.h"

namespace ringtrain::training {
namespace {

// The value of a "# name = value" line of a saved configuration, if there is one.
std::optional<double> savedNumber(std::string_view text, std::string_view name) {
  const std::string key = "# " + std::string(name) + " = ";
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.substr(0, key.size()) == key) {
      const std::string_view value = line.substr(key.size());
      double parsed = 0;
      const auto [rest, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
      if (error == std::errc() && rest == value.data() + value.size()) return parsed;
      return std::nullopt;
    }
    at = end + 1;
  }
  return std::nullopt;
}

// The seed of the generator that draws epoch `epoch`'s permutation (data/sharded_sampler.cc).
std::uint64_t epochGeneratorSeed(std::uint64_t seed, std::int64_t epoch) {
  return data::hash64(seed, static_cast<std::uint64_t>(epoch));
}

}  // namespace

double freshBaseLearningRate(const TrainConfig& config, int worldSize) {
  return config.learningRate * (config.scaleLr ? worldSize : 1);
}

storage::CheckpointContent checkpointContent(const models::Model<float>& model,
                                             Optimizer& optimizer, const TrainConfig& config,
                                             std::int64_t step, data::SamplerPosition next,
                                             int worldSize, double baseLr) {
  storage::CheckpointContent c;
  c.step = step;
  c.epoch = next.epoch;
  c.sampler = next;
  c.seed = config.seed;
  c.rngState = {epochGeneratorSeed(config.seed, next.epoch)};
  c.worldSize = worldSize;
  c.batchSize = config.batchSize;
  c.optimizerKind = std::string(nameIn(kOptimizerNames, config.optimizer));
  c.optimizerSteps = optimizer.steps();
  // Exact decimal forms: a resized run scales the learning rate the saved run really used.
  c.config =
      configLines(config) + fmt::format("# base-lr = {}\n# lr = {}\n", baseLr, config.learningRate);
  c.modelLayout = model.describe();
  c.parameters = storage::tensorsFromTable(model.parameterTable(), model.parameters());
  c.optimizerState =
      storage::optimizerStateTensors(nameIn(kOptimizerNames, config.optimizer), optimizer.state());
  return c;
}

void restoreCheckpoint(const storage::CheckpointContent& saved, models::Model<float>& model,
                       Optimizer& optimizer, std::string_view optimizerKind,
                       const std::filesystem::path& file) {
  storage::copyTensorsToFlat(saved.parameters, model.parameterTable(), model.parameters(), file);
  storage::restoreOptimizerState(saved, optimizerKind, optimizer.state(), file);
  optimizer.restoreSteps(saved.optimizerSteps);
}

std::variant<ResumePoint, std::string> planResume(const storage::CheckpointContent& saved,
                                                  const TrainConfig& config, int worldSize,
                                                  std::int64_t datasetSize) {
  ResumePoint point;
  point.step = saved.step;
  point.optimizerSteps = saved.optimizerSteps;
  const std::int64_t savedGlobal = saved.batchSize * saved.worldSize;
  if (saved.worldSize == worldSize) {
    // The same ranks: this run's options, as a fresh run would take them (exact resume when
    // they are the saved run's).
    point.batchSize = config.batchSize;
    point.baseLr = freshBaseLearningRate(config, worldSize);
  } else {
    // The learning rate the saved run used, times any change of --lr since.
    const double savedLr = savedNumber(saved.config, "lr").value_or(config.learningRate);
    const double savedBase =
        savedNumber(saved.config, "base-lr")
            .value_or(config.learningRate * (config.scaleLr ? saved.worldSize : 1));
    point.baseLr = savedBase * (config.learningRate / savedLr);
    if (config.onResize == OnResize::kKeepGlobalBatch) {
      if (savedGlobal % worldSize != 0) {
        return fmt::format(
            "--on-resize keep-global-batch: the checkpoint's global batch of {} ({} ranks x {}) "
            "cannot be split evenly over {} ranks; use a rank count that divides {}, or "
            "--on-resize keep-per-rank-batch",
            savedGlobal, saved.worldSize, saved.batchSize, worldSize, savedGlobal);
      }
      point.batchSize = static_cast<int>(savedGlobal / worldSize);
      point.notes.push_back(fmt::format(
          "{} ranks instead of {}: global batch kept at {} ({} per rank instead of {}), "
          "learning rate {} (--on-resize keep-global-batch)",
          worldSize, saved.worldSize, savedGlobal, point.batchSize, saved.batchSize, point.baseLr));
    } else {
      point.batchSize = config.batchSize;
      const std::int64_t global = std::int64_t{point.batchSize} * worldSize;
      point.baseLr *= static_cast<double>(global) / static_cast<double>(savedGlobal);
      point.notes.push_back(fmt::format(
          "{} ranks instead of {}: {} per rank, global batch {} instead of {}, learning rate "
          "scaled by {}/{} to {} (--on-resize keep-per-rank-batch)",
          worldSize, saved.worldSize, point.batchSize, global, savedGlobal, global, savedGlobal,
          point.baseLr));
    }
  }
  if (point.batchSize < 1) return "the resumed batch per rank would be below 1";

  // The position in the epoch, as samples seen, in this run's layout.
  data::SamplerOptions layout;
  layout.datasetSize = datasetSize;
  layout.rank = 0;
  layout.worldSize = worldSize;
  layout.batchSize = point.batchSize;
  layout.dropLast = config.dropLast;
  std::int64_t stepsPerEpoch = 0;
  try {
    stepsPerEpoch = data::ShardedSampler(layout).stepsPerEpoch();
  } catch (const std::exception& e) {
    return std::string("cannot resume: ") + e.what();
  }
  const std::int64_t global = std::int64_t{point.batchSize} * worldSize;
  point.sampler = saved.sampler;
  if (global != savedGlobal) {
    point.sampler.step = saved.sampler.step * savedGlobal / global;
    if (saved.sampler.step * savedGlobal % global != 0) {
      point.notes.push_back(fmt::format(
          "the epoch's position ({} samples seen) is not a whole number of the new global "
          "batches of {}: continuing at step {} of the epoch, {} samples are seen twice",
          saved.sampler.step * savedGlobal, global, point.sampler.step,
          saved.sampler.step * savedGlobal - point.sampler.step * global));
    }
  }
  if (point.sampler.step >= stepsPerEpoch) point.sampler = {point.sampler.epoch + 1, 0};
  if (saved.rngState.size() == 1 &&
      saved.rngState[0] != epochGeneratorSeed(config.seed, saved.sampler.epoch)) {
    point.notes.push_back(fmt::format(
        "--seed {} differs from the saved run's {}: the data order from here on is another",
        config.seed, saved.seed));
  }
  return point;
}

}  // namespace ringtrain::training
