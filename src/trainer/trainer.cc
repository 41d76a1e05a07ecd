#include "src/trainer/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>

#include "collectives/fingerprint.h"
#include "src/common/log.h"

namespace ringtrain {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

data::SamplerOptions samplerOptions(const TrainConfig& config, std::int64_t datasetSize,
                                    const collectives::Communicator& comm) {
  data::SamplerOptions o;
  o.datasetSize = datasetSize;
  o.rank = comm.rank();
  o.worldSize = comm.size();
  o.batchSize = config.batchSize;
  o.dropLast = config.dropLast;
  o.seed = config.seed;
  return o;
}

OptimizerOptions optimizerOptions(const TrainConfig& c) {
  OptimizerOptions o;
  o.kind = c.optimizer;
  o.momentum = static_cast<float>(c.momentum);
  o.nesterov = c.nesterov;
  o.weightDecay = static_cast<float>(c.weightDecay);
  o.beta1 = static_cast<float>(c.beta1);
  o.beta2 = static_cast<float>(c.beta2);
  o.epsilon = static_cast<float>(c.epsilon);
  return o;
}

}  // namespace

models::ModelSpec modelSpecFor(const TrainConfig& config, const BatchSource& train) {
  models::ModelSpec spec;
  spec.name = config.model;
  const data::SampleShape shape = train.sampleShape();
  spec.input = {shape.channels, shape.height, shape.width};
  spec.classes = std::max(1, train.classes());
  spec.hidden.assign(config.hidden.begin(), config.hidden.end());
  return spec;
}

Trainer::Trainer(const TrainConfig& config, const BatchSource& train, const BatchSource& test,
                 collectives::Communicator& communicator, bool log)
    : config_(config),
      train_(train),
      test_(test),
      comm_(communicator),
      log_(log && communicator.rank() == 0),
      model_(models::makeModel<float>(modelSpecFor(config, train))),
      sampler_(samplerOptions(config, train.size(), communicator)) {
  stepsPerEpoch_ = sampler_.stepsPerEpoch();
  plannedSteps_ = config.steps > 0 ? config.steps : config.epochs * stepsPerEpoch_;

  // Rank 0's weights, everywhere: one broadcast of the flat buffer.
  if (comm_.rank() == 0) model_.initialize(config.seed);
  comm_.broadcast(model_.parameters(), 0);
  model_.reserve(config.batchSize);

  optimizer_ = makeOptimizer(optimizerOptions(config), model_.parameterCount());
  averaged_.resize(model_.gradients().size_bytes());
  schedule_.kind = config.lrSchedule;
  schedule_.baseLr = config.learningRate * (config.scaleLr ? comm_.size() : 1);
  schedule_.warmupSteps = config.warmupSteps;
  schedule_.stepSize = config.lrStepSize;
  schedule_.gamma = config.lrGamma;
  schedule_.totalSteps = plannedSteps_;

  const std::size_t sampleSize = static_cast<std::size_t>(train.sampleShape().elements());
  inputs_.resize(static_cast<std::size_t>(config.batchSize) * sampleSize);
  labels_.resize(static_cast<std::size_t>(config.batchSize));
  values_.resize(static_cast<std::size_t>(config.batchSize));
}

void Trainer::log(const std::string& line) const {
  if (log_) logLine(line);
}

void Trainer::trainStep(std::int64_t step) {
  const auto start = Clock::now();
  const std::span<const std::int64_t> indices = sampler_.next();
  const std::size_t batch = indices.size();
  const std::size_t sampleSize = static_cast<std::size_t>(train_.sampleShape().elements());
  train_.gather(indices, inputs_.data(), labels_.data(), values_.data());

  models::Batch<float> input;
  input.inputs = {inputs_.data(), batch * sampleSize};
  if (isClassification()) {
    input.labels = {labels_.data(), batch};
  } else {
    input.values = {values_.data(), batch};
  }
  const auto gathered = Clock::now();
  const models::BatchResult result = model_.forward(input);
  model_.backward();
  const auto computed = Clock::now();
  // One rank has nothing to average: the optimiser reads the gradients themselves.
  std::span<float> averaged = model_.gradients();
  if (comm_.size() > 1) {
    const std::span<const float> gradients = model_.gradients();
    averaged = {reinterpret_cast<float*>(averaged_.data()), gradients.size()};
    comm_.allreduce(gradients, averaged, collectives::ReduceOp::kAverage);
  }
  const auto averagedAt = Clock::now();
  optimizer_->step(model_.parameters(), averaged,
                   static_cast<float>(learningRateAt(schedule_, step)));
  const auto updated = Clock::now();
  using Seconds = std::chrono::duration<double>;
  dataSeconds_ += Seconds(gathered - start).count();
  computeSeconds_ += Seconds(computed - gathered).count();
  communicationSeconds_ += Seconds(averagedAt - computed).count();
  optimizerSeconds_ += Seconds(updated - averagedAt).count();
  windowLoss_ += result.lossSum;
  windowSamples_ += result.samples;
}

models::BatchResult Trainer::evaluate() {
  const data::IndexRange shard = data::contiguousShard(test_.size(), comm_.rank(), comm_.size());
  const std::size_t chunk = static_cast<std::size_t>(std::max(config_.batchSize, 256));
  const std::size_t sampleSize = static_cast<std::size_t>(test_.sampleShape().elements());
  std::vector<float> inputs(chunk * sampleSize);
  std::vector<std::int32_t> labels(chunk);
  std::vector<float> values(chunk);
  std::vector<std::int64_t> indices;
  models::BatchResult local;
  for (std::int64_t begin = shard.begin; begin < shard.end;
       begin += static_cast<std::int64_t>(chunk)) {
    const std::int64_t end =
        std::min<std::int64_t>(shard.end, begin + static_cast<std::int64_t>(chunk));
    indices.clear();
    for (std::int64_t i = begin; i < end; ++i)
      indices.push_back(i);
    test_.gather(indices, inputs.data(), labels.data(), values.data());
    models::Batch<float> batch;
    batch.inputs = {inputs.data(), indices.size() * sampleSize};
    if (isClassification()) {
      batch.labels = {labels.data(), indices.size()};
    } else {
      batch.values = {values.data(), indices.size()};
    }
    const models::BatchResult part = model_.evaluate(batch);
    local.lossSum += part.lossSum;
    local.correct += part.correct;
    local.samples += part.samples;
  }
  // Counts are exact in float64 far beyond any test set.
  std::array<double, 3> totals = {local.lossSum, static_cast<double>(local.correct),
                                  static_cast<double>(local.samples)};
  comm_.allreduce(std::span<double>(totals), collectives::ReduceOp::kSum);
  models::BatchResult global;
  global.lossSum = totals[0];
  global.correct = static_cast<std::int64_t>(totals[1]);
  global.samples = static_cast<models::Index>(totals[2]);
  return global;
}

TrainingSummary Trainer::run() {
  TrainingSummary summary;
  const auto wallStart = Clock::now();
  const std::int64_t globalBatch = static_cast<std::int64_t>(config_.batchSize) * comm_.size();
  log(
      fmt::format("training {} ({} parameters) on {} rank(s), backend {}: {} steps of {} samples "
                  "({} per rank), {} steps per epoch",
                  config_.model, model_.parameterCount(), comm_.size(), comm_.backendName(),
                  plannedSteps_, globalBatch, config_.batchSize, stepsPerEpoch_));
  log("data: " + train_.describe() + "; test: " + test_.describe());

  auto evaluateAndLog = [&](std::int64_t step) {
    summary.lastEvaluation = evaluate();
    const std::int64_t epoch = step / stepsPerEpoch_;
    if (isClassification()) {
      log(fmt::format("Accuracy at step {}: {:.4f}  (test loss {:.4f}, epoch {}, {} test samples)",
                      step, summary.lastEvaluation.accuracy(), summary.lastEvaluation.meanLoss(),
                      epoch, summary.lastEvaluation.samples));
    } else {
      log(fmt::format("Test loss at step {}: {:.6f}  (epoch {}, {} test samples)", step,
                      summary.lastEvaluation.meanLoss(), epoch, summary.lastEvaluation.samples));
    }
  };

  double trainingSeconds = 0;
  double windowSeconds = 0;
  std::int64_t samplesTrained = 0;
  for (std::int64_t step = 0; step < plannedSteps_; ++step) {
    const auto stepStart = Clock::now();
    trainStep(step);
    const double seconds = secondsSince(stepStart);
    trainingSeconds += seconds;
    windowSeconds += seconds;
    samplesTrained +=
        static_cast<std::int64_t>(sampler_.batchSizeAt(step % stepsPerEpoch_)) * comm_.size();

    const std::int64_t done = step + 1;
    if (config_.logEvery > 0 && (done % config_.logEvery == 0 || done == plannedSteps_)) {
      // The loss over the window, all ranks: one small all-reduce every logEvery steps.
      std::array<double, 2> window = {windowLoss_, static_cast<double>(windowSamples_)};
      comm_.allreduce(std::span<double>(window), collectives::ReduceOp::kSum);
      summary.lastTrainingLoss = window[1] > 0 ? window[0] / window[1] : 0;
      const double rate = window[1] / std::max(windowSeconds, 1e-9);
      log(fmt::format("step {} (epoch {})  loss {:.4f}  lr {:.5f}  {:.0f} samples/s ({:.0f}/rank)",
                      done, step / stepsPerEpoch_, summary.lastTrainingLoss,
                      learningRateAt(schedule_, step), rate, rate / comm_.size()));
      windowLoss_ = 0;
      windowSamples_ = 0;
      windowSeconds = 0;
    }
    const bool epochEnd = done % stepsPerEpoch_ == 0;
    const bool periodic = config_.evalEvery > 0 && done % config_.evalEvery == 0;
    if (epochEnd || periodic || done == plannedSteps_) evaluateAndLog(done);
  }

  summary.steps = plannedSteps_;
  summary.trainingSeconds = trainingSeconds;
  // The slowest rank's time is the job's.
  comm_.allreduce(std::span<double>(&summary.trainingSeconds, 1), collectives::ReduceOp::kMax);
  summary.samplesPerSecond = static_cast<double>(samplesTrained) / summary.trainingSeconds;
  summary.samplesPerSecondPerRank = summary.samplesPerSecond / comm_.size();
  const std::uint64_t print =
      collectives::fingerprint(model_.parameters().data(), model_.parameters().size_bytes());
  // One all-reduce gives min and max: the minimum of ~x is ~(maximum of x).
  std::array<std::int64_t, 2> range = {static_cast<std::int64_t>(print),
                                       ~static_cast<std::int64_t>(print)};
  comm_.allreduce(std::span<std::int64_t>(range), collectives::ReduceOp::kMin);
  summary.replicasIdentical = range[0] == ~range[1];
  summary.dataSeconds = dataSeconds_;
  summary.computeSeconds = computeSeconds_;
  summary.communicationSeconds = communicationSeconds_;
  summary.optimizerSeconds = optimizerSeconds_;
  summary.wallSeconds = secondsSince(wallStart);
  return summary;
}

}  // namespace ringtrain
