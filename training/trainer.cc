#include "training/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory_resource>
#include <stdexcept>
#include <thread>

#include "base/fingerprint.h"
#include "base/steady_clock.h"
#include "collectives/mpi_check.h"
#include "engine/exchange_factory.h"
#include "models/matrix_products.h"
#include "training/device_choice.h"
#include "training/evaluation.h"
#include "training/model_memory.h"
#include "training/optimizer_shards.h"
#include "training/stop_agreement.h"

namespace ringtrain::training {
namespace {

double secondsBetween(std::int64_t startNs, std::int64_t endNs) {
  return static_cast<double>(endNs - startNs) * 1e-9;
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

// The GPT's tensors of fewer than two dimensions (biases, LayerNorm gains): GPT-2 recipes
// (nanoGPT, llm.c) decay matrices and embeddings only.
std::vector<std::pair<std::size_t, std::size_t>> undecayedRanges(const TrainConfig& c,
                                                                 const models::Model<float>& m) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  if (c.model != ModelKind::kGpt) return ranges;
  for (const models::ParameterEntry& entry : m.parameterTable()) {
    if (entry.shape.size() >= 2) continue;
    if (!ranges.empty() && ranges.back().second == entry.offset) {
      ranges.back().second += entry.count;
    } else {
      ranges.emplace_back(entry.offset, entry.offset + entry.count);
    }
  }
  return ranges;
}

// The global L2 norm of the averaged gradients (the same on every rank, which holds the same
// average), in float64.
double globalNorm(std::span<const float> gradients) {
  double sum = 0;
  for (const float g : gradients)
    sum += static_cast<double>(g) * g;
  return std::sqrt(sum);
}

// ZeRO-1: the elements this rank updates, sorted (the shards come in bucket order, from the end
// of the buffer).
std::vector<std::pair<std::size_t, std::size_t>> ownedRanges(
    const std::vector<engine::GradientBucket>& shards) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (const engine::GradientBucket& shard : shards)
    ranges.emplace_back(shard.offset, shard.offset + shard.count);
  std::sort(ranges.begin(), ranges.end());
  return ranges;
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

// Index of the first value that is NaN or infinite, or -1: exponent bits all ones, which the
// compiler checks a vector at a time.
std::int64_t firstNonFinite(const float* values, std::size_t count) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, values + i, 4);
    any |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (!any) return -1;
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return static_cast<std::int64_t>(i);
  }
  return -1;
}

}  // namespace

models::ModelSpec modelSpecFor(const TrainConfig& config, const BatchSource& train) {
  models::ModelSpec spec;
  spec.name = std::string(nameIn(kModelNames, config.model));
  const data::SampleShape shape = train.sampleShape();
  spec.input = {shape.channels, shape.height, shape.width};
  spec.classes = std::max(1, train.classes());
  spec.hidden.assign(config.hidden.begin(), config.hidden.end());
  spec.gpt = config.gpt;
  return spec;
}

Trainer::Trainer(const TrainConfig& config, const BatchSource& train, const BatchSource& test,
                 const TrainerEnvironment& environment)
    : config_(config),
      train_(train),
      test_(test),
      environment_(environment),
      control_(collectives::makeCommunicator(engine::controlBackend(gradientBackend(config)),
                                             environment.comm,
                                             engine::controlOptions(exchangeOptions(config)))),
      reporter_(config_, train, test, *control_, environment.log, environment.trainingLog),
      evaluation_(
          test, *control_,
          [this](const models::Batch<float>& view) {
            return gpu_ ? gpu_->evaluate(view) : model_.evaluate(view);
          },
          config.evalSamples, config.evalEvery, environment.timeline),
      checkpoints_(config_, reporter_, environment.timeline),
      trace_(environment.timeline),
      model_(allocateModel(config, modelSpecFor(config, train))),
      sampler_(samplerOptions(config, train.size(), *control_)),
      stateIndex_(model_.parameterCount()) {
  // Process-wide (models/matrix_products.h): every product this trainer's model computes.
  if (config.precision == models::Precision::kBfloat16 && !models::bf16ProductsSupported())
    throw std::runtime_error("--precision bf16 needs a CPU with AVX512-BF16 instructions");
  models::setMatrixPrecision(config.precision);
  plan_.stepsPerEpoch = sampler_.stepsPerEpoch();
  plan_.plannedSteps =
      config.steps > 0 ? config.steps : stepsForBatches(config.epochs * plan_.stepsPerEpoch);
  optimizerChoice_ = optimizerOptions(config);
  optimizerChoice_.undecayed = undecayedRanges(config, model_);
  buildExchange();
  optimizer_ = makeOptimizer(optimizerChoice_, stateIndex_);
  if (environment_.watchdog) watchWith(*environment_.watchdog);

  // Before the first collective that depends on the layout: ranks that disagree are told so
  // here, by name, rather than in a broadcast of mismatched sizes.
  if (environment_.checkConsistency) environment_.checkConsistency(consistencyItems());
  // Rank 0's weights, everywhere: one broadcast of the flat buffer.
  if (control_->rank() == 0) model_.initialize(config.seed);
  control_->broadcast(model_.parameters(), 0);

  if (config.device == Device::kCuda) startGpu();
  reserveBatch(config.batchSize);
  if (const std::string model = gpu_ ? gpu_->describeModel() : ""; !model.empty())
    deviceLine_ += "; " + model;  // the convolutions' paths, chosen at reserve
  schedule_.kind = config.lrSchedule;
  schedule_.baseLr = config.learningRate * (config.scaleLr ? control_->size() : 1);
  schedule_.warmupSteps = config.warmupSteps;
  schedule_.stepSize = config.lrStepSize;
  schedule_.gamma = config.lrGamma;
  schedule_.totalSteps = plan_.plannedSteps;
  if (environment_.timeline)
    trace_.observe(model_, exchange_->buckets(), config.device != Device::kCuda);
  batches_ = std::make_unique<BatchPrefetcher>(
      train, prefetchesInBackground(config, train.readsStorage()),
      gpu_ ? gpu_->hostMemory() : std::pmr::get_default_resource());
}

void Trainer::buildExchange() {
  // One gradient segment per layer with parameters, in the buffer's (forward) order.
  std::vector<engine::GradientSegment> segments;
  segmentOfLayer_.assign(static_cast<std::size_t>(model_.layerCount()), -1);
  for (const models::LayerParameters& layer : model_.parameterLayers()) {
    segmentOfLayer_[static_cast<std::size_t>(layer.layerIndex)] = static_cast<int>(segments.size());
    segments.push_back({layer.name, layer.offset, layer.count});
  }
  exchange_ =
      engine::makeGradientExchange(gradientBackend(config_), environment_.comm, std::move(segments),
                                   exchangeOptions(config_), environment_.timeline);
  if (config_.zero > 0) stateIndex_ = StateIndex(ownedRanges(exchange_->shards()));
  if (config_.device == Device::kCuda) return;  // startGpu brings the device buffers
  buffers_ = exchange_->hostBuffers(model_.gradients());
  buffers_.parameters = model_.parameters();
  // An exchange that reads the gradients where backward writes them keeps them itself.
  if (buffers_.gradients.data() != model_.gradients().data()) {
    model_.placeGradients(buffers_.gradients);
  }
}

void Trainer::startGpu() {
  collectives::Communicator* gradients = exchange_->communicator();
  if (gradients == nullptr) {
    throw std::invalid_argument("--device cuda averages GPU buffers with the nccl backend");
  }
  gpu_ = makeGpuReplica(model_, optimizerOptions(config_),
                        {config_.tf32, config_.gpuConvolutions, config_.gpuConvAlgorithms},
                        *gradients);
  buffers_ = {gpu_->gradients(), gpu_->averaged()};
  std::vector<std::int32_t> devices(static_cast<std::size_t>(control_->size()));
  const std::int32_t mine = gpu_->deviceIndex();
  control_->allgather(&mine, devices.data(), 1, collectives::DataType::kInt32);
  deviceLine_ = fmt::format("device cuda{}: rank 0 on {}; GPU index per rank: {}",
                            config_.tf32 ? " (TF32 matrix products)" : "", gpu_->describe(),
                            fmt::join(devices, ","));
}

Trainer::~Trainer() {
  collectives::Communicator* gradients = exchange_ ? exchange_->communicator() : nullptr;
  if (environment_.watchdog) {
    environment_.watchdog->unwatch(*control_);
    if (gradients) environment_.watchdog->unwatch(*gradients);
  }
  exchange_.reset();  // joins the communication thread before the rest goes
}

void Trainer::watchWith(collectives::StallWatchdog& watchdog) {
  environment_.watchdog = &watchdog;
  watchdog.watch(*control_, "control");
  if (collectives::Communicator* gradients = exchange_->communicator()) {
    watchdog.watch(*gradients, "gradient");
  }
}

options::ConsistencyItems Trainer::consistencyItems() const {
  options::ConsistencyItems items = comparableOptions(config_);
  items.emplace_back("ranks", std::to_string(control_->size()));
  // --data may differ from node to node, the data it holds may not; compared before the model,
  // whose layout follows from it.
  for (const auto* source : {&train_, &test_}) {
    for (auto& item : dataFacts(*source, source == &train_ ? "train data" : "test data"))
      items.push_back(std::move(item));
  }
  for (auto& item : options::itemsFromLines("model", model_.describe()))
    items.push_back(std::move(item));
  for (auto& item : options::itemsFromLines("bucket plan", exchange_->describePlan())) {
    items.push_back(std::move(item));
  }
  return items;
}

const HostBatch& Trainer::nextBatch(std::int64_t step, bool lastOfStep) {
  const std::span<const std::int64_t> indices = sampler_.next();
  HostBatch& host = batches_->take(indices);
  // The next batch is gathered while this one trains (--prefetch); not past the last step.
  if (step + 1 < plan_.plannedSteps || !lastOfStep) batches_->prefetch(sampler_.peek());
  if (step == config_.test.nanStep && control_->rank() == 0) {
    host.inputs[0] = std::numeric_limits<float>::quiet_NaN();
  }
  failIfAsked(FailurePoint::kData, step);
  return host;
}

void Trainer::failIfAsked(FailurePoint point, std::int64_t step) const {
  const TrainTestHooks& test = config_.test;
  if (test.failAt == point && step + 1 == test.failStep && control_->rank() == test.failRank) {
    throw std::runtime_error(fmt::format("test fault: {} failed on rank {} in step {}",
                                         nameIn(kFailurePointNames, point), test.failRank,
                                         step + 1));
  }
}

models::BatchResult Trainer::computeGradients(const models::Batch<float>& input, std::int64_t step,
                                              bool lastOfStep) {
  const models::GradientReadyCallback ready = [&](const models::LayerParameters& layer) {
    // The earlier micro-batches' sum goes into the layer before the exchange may read it.
    if (accumulator_ && gpu_) {
      gpu_->accumulate(layer.offset, layer.count, accumulator_->rule());
    } else if (accumulator_) {
      accumulator_->layerReady(model_.gradients(), layer.offset, layer.count);
    }
    if (lastOfStep) {
      exchange_->segmentReady(segmentOfLayer_[static_cast<std::size_t>(layer.layerIndex)]);
    }
    failIfAsked(FailurePoint::kBackward, step);
  };
  // On the GPU, forward and backward only enqueue: the loss comes after the step.
  if (gpu_) {
    gpu_->forward(input);
    gpu_->backward(ready);
    return {};
  }
  const models::BatchResult result = model_.forward(input);
  model_.backward(ready);
  return result;
}

void Trainer::updateBucket(const engine::GradientBucket& b, float learningRate,
                           double& optimizerSeconds) {
  const std::int64_t t0 = steadyNowNs();
  if (gpu_) {
    gpu_->update(b.offset, b.offset + b.count, learningRate);
  } else {
    optimizer_->update(model_.parameters(), updateFrom_, b.offset, b.offset + b.count,
                       learningRate);
  }
  optimizerSeconds += secondsBetween(t0, steadyNowNs());
  trace_.optimizerSpan(static_cast<std::size_t>(b.index), t0);
}

std::string Trainer::firstNonFiniteIn(const engine::GradientBucket& b) const {
  const std::int64_t at = gpu_ ? gpu_->firstNonFinite(b.offset, b.count)
                               : firstNonFinite(buffers_.averaged.data() + b.offset, b.count);
  if (at < 0) return "";
  const std::size_t element = b.offset + static_cast<std::size_t>(at);
  const float value = gpu_ ? gpu_->averagedValue(element) : buffers_.averaged[element];
  const auto [tensor, index] = parameterAt(element);
  return tensor.empty() ? fmt::format("the averaged gradient holds {} (element {})", value, index)
                        : fmt::format("the averaged gradient of {} holds {} (element {})", tensor,
                                      value, index);
}

std::pair<std::string, std::size_t> Trainer::parameterAt(std::size_t element) const {
  for (const models::ParameterEntry& entry : model_.parameterTable()) {
    if (element >= entry.offset && element < entry.offset + entry.count)
      return {entry.name, element - entry.offset};
  }
  return {"", element};
}

std::string Trainer::averageAndUpdate(std::int64_t step, double& optimizerSeconds) {
  // Each bucket's parameters are updated as soon as its average is complete, unless a
  // non-finite gradient may still cancel the whole step (--check-finite skip).
  const float lr = static_cast<float>(learningRateAt(schedule_, step));
  updateFrom_ = buffers_.averaged;
  const bool check = config_.checkFinite != CheckFinite::kOff;
  // Clipping needs the norm of every bucket's average before the first update.
  const bool clip = config_.clipGradNorm > 0;
  const bool deferUpdates = config_.checkFinite == CheckFinite::kSkip || clip;
  // The value reported is the first non-finite one of the first bucket that holds one, whatever
  // parts the bucket arrived in (the shm exchange hands buckets over in parts that depend on
  // timing): every rank names the same element.
  int problemBucket = std::numeric_limits<int>::max();
  std::size_t problemOffset = 0;
  std::string problem;
  exchange_->finishStep([&](const engine::GradientBucket& b) {
    failIfAsked(FailurePoint::kAveraging, step);
    const bool earlier =
        b.index < problemBucket || (b.index == problemBucket && b.offset < problemOffset);
    if (check && earlier) {
      if (std::string found = firstNonFiniteIn(b); !found.empty()) {
        problem = std::move(found);
        problemBucket = b.index;
        problemOffset = b.offset;
      }
    }
    if (!deferUpdates) {
      updateBucket(b, lr, optimizerSeconds);
      exchange_->parametersUpdated(b);
    }
    failIfAsked(FailurePoint::kOptimizer, step);
  });
  if (!problem.empty()) return fmt::format("step {}: {}", step + 1, problem);
  if (clip) clipAveragedGradients();
  if (deferUpdates) {
    for (const engine::GradientBucket& b : exchange_->shards()) {
      updateBucket(b, lr, optimizerSeconds);
      exchange_->parametersUpdated(b);
    }
  }
  exchange_->awaitParameters();
  if (gpu_) {
    gpu_->finishStep();
  } else {
    optimizer_->finishStep();
  }
  return "";
}

void Trainer::clipAveragedGradients() {
  // The averaged buffer may be shared by the ranks of a node (shm): scaled into a copy of this
  // rank's own, never in place.
  const std::span<const float> averaged = buffers_.averaged;
  const double norm = config_.zero > 0 ? shardedNorm() : globalNorm(averaged);
  if (!(norm > config_.clipGradNorm)) return;
  const auto scale = static_cast<float>(config_.clipGradNorm / (norm + 1e-6));
  clipped_.resize(averaged.size());
  // Only the elements this rank updates are read (with ZeRO-1 its shards).
  for (const engine::GradientBucket& b : exchange_->shards()) {
    for (std::size_t i = b.offset; i < b.offset + b.count; ++i)
      clipped_[i] = averaged[i] * scale;
  }
  updateFrom_ = clipped_;
}

double Trainer::shardedNorm() {
  // Each rank holds its shards' averages only: their sums of squares, added over the ranks. The
  // sum is associated otherwise than globalNorm's, so clipped runs differ from --zero 0 in the
  // last bits.
  double sum = 0;
  for (const engine::GradientBucket& b : exchange_->shards()) {
    for (const float g : buffers_.averaged.subspan(b.offset, b.count))
      sum += static_cast<double>(g) * g;
  }
  control_->allreduce(std::span<double>(&sum, 1), collectives::ReduceOp::kSum);
  return std::sqrt(sum);
}

std::int64_t Trainer::trainStep(std::int64_t step, TrainingSummary& summary) {
  const std::int64_t start = steadyNowNs();
  trace_.beginStep();
  models::BatchResult result;
  std::int64_t samples = 0;
  for (int micro = 0; micro < config_.accumulateSteps; ++micro) {
    const bool last = micro + 1 == config_.accumulateSteps;
    const std::int64_t begun = steadyNowNs();
    const HostBatch& batch = nextBatch(step, last);
    const models::Batch<float> input = batchView(batch, train_);
    const std::int64_t gathered = steadyNowNs();
    trace_.span("data", "data", begun);
    const auto size = static_cast<std::int64_t>(batch.samples);
    samples += size;
    if (accumulator_) accumulator_->beginMicroBatch(micro, size, last);
    if (last) exchange_->beginStep(buffers_);
    result.add(computeGradients(input, step, last));
    // On the GPU the loss is known once the micro-batch has run: the last one's after the step.
    if (gpu_ && !last) result.add(gpu_->lastResult());
    summary.dataSeconds += secondsBetween(begun, gathered);
    summary.computeSeconds += secondsBetween(gathered, steadyNowNs());
  }
  double optimizerSeconds = 0;
  const std::string problem = averageAndUpdate(step, optimizerSeconds);
  if (!problem.empty()) {
    if (config_.checkFinite == CheckFinite::kStop) {
      throw TrainingStopped(problem + "; stopping (--check-finite stop)");
    }
    reporter_.log("skipping " + problem + " (--check-finite skip)");
    ++summary.skippedSteps;
  }
  if (gpu_) result.add(gpu_->lastResult());
  const std::int64_t finished = steadyNowNs();
  trace_.endStep();

  summary.waitSeconds += exchange_->lastWaitSeconds();
  summary.reduceSeconds += exchange_->lastReduceSeconds();
  summary.optimizerSeconds += optimizerSeconds;
  summary.trainingSeconds += secondsBetween(start, finished);
  // A skipped step's loss (of a batch that made the gradients non-finite) is not the model's.
  if (problem.empty()) reporter_.countResult(result);
  return samples;
}

models::BatchResult Trainer::evaluate(bool whole) {
  return evaluation_.evaluate(whole, config_.batchSize);
}

void Trainer::resume() {
  StartDecision start;
  // With ZeRO-1 rank 0 reads the whole state into an optimiser of its own, then hands out shards.
  std::unique_ptr<Optimizer> whole = wholeOptimizerOnRoot();
  if (control_->rank() == 0) {
    start = checkpoints_.decideOnRoot(model_, whole ? *whole : *optimizer_, control_->size(),
                                      train_.size());
  }
  broadcastStartDecision(*control_, start);
  if (start.kind == StartKind::kRefused) throw ResumeRefused(start.refusal);
  if (start.kind == StartKind::kFresh) return;
  // Rank 0 has restored its model (and, resuming, its optimiser) from the file; the others take
  // them from it.
  control_->broadcast(model_.parameters(), 0);
  if (start.kind == StartKind::kResumed) {
    if (config_.zero > 0) {
      scatterShards(whole.get(), *optimizer_, stateIndex_, *control_);
    } else {
      for (const std::span<float> state : optimizer_->state())
        control_->broadcast(state, 0);
    }
    continueAt(start.point);
  }
  if (gpu_) gpu_->upload(model_, *optimizer_);
}

void Trainer::continueAt(const ResumePoint& point) {
  plan_.firstStep = point.step;
  checkpoints_.markSaved(point.step);
  optimizer_->restoreSteps(point.optimizerSteps);
  if (point.batchSize != config_.batchSize) {
    config_.batchSize = point.batchSize;
    reserveBatch(config_.batchSize);
  }
  sampler_ = data::ShardedSampler(samplerOptions(config_, train_.size(), *control_), point.sampler);
  plan_.stepsPerEpoch = sampler_.stepsPerEpoch();
  if (config_.steps > 0) {
    plan_.plannedSteps = std::max(config_.steps, plan_.firstStep);
  } else {
    // The rest of this epoch and the epochs after it, in this run's layout.
    const data::SamplerPosition at = sampler_.position();
    const std::int64_t perEpoch = plan_.stepsPerEpoch;
    const std::int64_t left = config_.epochs * perEpoch - (at.epoch * perEpoch + at.step);
    plan_.plannedSteps = plan_.firstStep + stepsForBatches(std::max<std::int64_t>(0, left));
  }
  schedule_.baseLr = point.baseLr;
  schedule_.totalSteps = plan_.plannedSteps;
}

void Trainer::saveCheckpoint(std::int64_t step, TrainingSummary& summary) {
  failIfAsked(FailurePoint::kCheckpoint, step - 1);
  checkpoints_.markSaved(step);
  if (!checkpoints_.writes()) return;  // nothing is written (the same on every rank)
  stopIfParametersDiverged(step);      // downloads a GPU's parameters on rank 0
  // Checkpoints hold the whole optimiser state: with ZeRO-1 rank 0 gathers it first.
  std::unique_ptr<Optimizer> whole = wholeOptimizerOnRoot();
  if (config_.zero > 0) gatherShards(*optimizer_, stateIndex_, whole.get(), *control_);
  if (control_->rank() != 0) return;
  const SavedCheckpoint saved = checkpoints_.save(step, [&] {
    return checkpointContent(model_, whole ? *whole : *optimizer_, config_, step,
                             sampler_.position(), control_->size(), schedule_.baseLr);
  });
  ++summary.checkpoints;
  summary.checkpointSeconds += saved.seconds;
  summary.lastCheckpoint = saved.path;
}

std::unique_ptr<Optimizer> Trainer::wholeOptimizerOnRoot() const {
  if (config_.zero == 0 || control_->rank() != 0) return nullptr;
  return makeOptimizer(optimizerChoice_, model_.parameterCount());
}

void Trainer::downloadFromGpu() {
  if (gpu_) gpu_->download(model_, *optimizer_);
}

void Trainer::reserveBatch(int batchSize) {
  // The model that trains allocates for the batch; the host mirror of a GPU model needs none.
  if (gpu_) {
    gpu_->reserve(batchSize);
  } else {
    model_.reserve(batchSize);
  }
  if (config_.accumulateSteps > 1) accumulator_.emplace(model_.parameterCount(), batchSize);
}

void Trainer::logStart() const {
  reporter_.logStart(plan_, model_.parameterCount(), exchange_->buckets().size(), deviceLine_,
                     batches_->background());
}

void Trainer::evaluateAndLog(std::int64_t step, TrainingSummary& summary) {
  summary.lastEvaluation = evaluate(/*whole=*/step == plan_.plannedSteps);
  const std::int64_t epoch = sampler_.position().epoch;  // epochs completed
  const models::BatchResult& result = summary.lastEvaluation;
  stopIfDiverged("the test loss", result.meanLoss(), step, config_.learningRate);
  reporter_.logEvaluation(result, step, epoch);
}

void Trainer::logTrainingWindow(std::int64_t done, std::int64_t epoch, TrainingSummary& summary) {
  failIfAsked(FailurePoint::kLogging, done - 1);
  summary.lastTrainingLoss =
      reporter_.logWindow(done, epoch, plan_, learningRateAt(schedule_, done - 1));
}

void Trainer::stopIfParametersDiverged(std::int64_t step) {
  // The first non-finite parameter and its value, from rank 0.
  std::array<std::int64_t, 2> found = {-1, 0};
  if (control_->rank() == 0) {
    downloadFromGpu();
    const std::span<const float> parameters = model_.parameters();
    found[0] = firstNonFinite(parameters.data(), parameters.size());
    if (found[0] >= 0) {
      found[1] = std::bit_cast<std::int64_t>(
          static_cast<double>(parameters[static_cast<std::size_t>(found[0])]));
    }
  }
  control_->broadcast(std::span<std::int64_t>(found), 0);
  if (found[0] < 0) return;
  const auto [tensor, index] = parameterAt(static_cast<std::size_t>(found[0]));
  throw TrainingStopped(divergenceMessage(fmt::format("parameter {}[{}]", tensor, index),
                                          std::bit_cast<double>(found[1]), step,
                                          config_.learningRate) +
                        "; its checkpoint is not written");
}

bool Trainer::stopAgreed(std::int64_t done, TrainingSummary& summary) {
  const std::int64_t checkStart = steadyNowNs();
  const bool stop =
      stopAgreement_->exchange(environment_.stopRequested->load(std::memory_order_relaxed));
  summary.stopCheckSeconds += secondsBetween(checkStart, steadyNowNs());
  if (stop) {
    reporter_.log(fmt::format("SIGTERM: stopping after step {} of {}", done, plan_.plannedSteps));
    summary.stoppedBySigterm = true;
  }
  return stop;
}

void Trainer::finishSummary(std::int64_t step, std::int64_t samplesTrained, std::int64_t wallStart,
                            TrainingSummary& summary) {
  summary.steps = step - plan_.firstStep;
  summary.samples = samplesTrained;
  summary.lastStep = step;
  // The slowest rank's time is the job's.
  double slowest = summary.trainingSeconds;
  control_->allreduce(std::span<double>(&slowest, 1), collectives::ReduceOp::kMax);
  summary.samplesPerSecond = static_cast<double>(samplesTrained) / std::max(slowest, 1e-9);
  summary.samplesPerSecondPerRank = summary.samplesPerSecond / control_->size();
  summary.trainingSeconds = slowest;
  downloadFromGpu();
  const std::uint64_t print =
      fingerprint(model_.parameters().data(), model_.parameters().size_bytes());
  summary.parameterFingerprint = print;
  // One all-reduce gives min and max: the minimum of ~x is ~(maximum of x).
  std::array<std::int64_t, 2> range = {static_cast<std::int64_t>(print),
                                       ~static_cast<std::int64_t>(print)};
  control_->allreduce(std::span<std::int64_t>(range), collectives::ReduceOp::kMin);
  summary.replicasIdentical = range[0] == ~range[1];
  summary.wallSeconds = secondsBetween(wallStart, steadyNowNs());
}

void Trainer::accountMemoryAt(std::int64_t step, TrainingSummary& summary) {
  // A device model's buffers are not host memory.
  const MemoryAccount mine =
      accountMemory(model_, *optimizer_, gpu_ ? engine::StepBuffers{} : buffers_, *exchange_);
  summary.memory = gatherMemory(*control_, mine);
  if (environment_.trainingLog) logMemory(*environment_.trainingLog, step, summary.memory);
}

TrainingSummary Trainer::run() {
  TrainingSummary summary;
  summary.firstStep = plan_.firstStep;
  const std::int64_t wallStart = steadyNowNs();
  reporter_.beginRun(plan_, wallStart);
  logStart();
  std::int64_t samplesTrained = 0;
  if (environment_.stopRequested) stopAgreement_.emplace(environment_.comm);
  const std::int64_t planned = plan_.plannedSteps;
  std::int64_t step = plan_.firstStep;
  while (step < planned) {
    const data::SamplerPosition at = sampler_.position();
    const double before = summary.trainingSeconds;
    const double reducedBefore = summary.reduceSeconds;
    const std::int64_t samples = trainStep(step, summary);
    if (config_.test.stepSleepMs > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(config_.test.stepSleepMs));
    }
    reporter_.countStep(summary.trainingSeconds - before, summary.reduceSeconds - reducedBefore);
    samplesTrained += samples * control_->size();

    const std::int64_t done = ++step;
    if (reporter_.windowEndsAfter(done, planned)) logTrainingWindow(done, at.epoch, summary);
    const bool epochEnd = sampler_.position().epoch > at.epoch;  // an epoch ended in the step
    if (evaluation_.dueAfter(done, epochEnd, planned)) evaluateAndLog(done, summary);
    if (checkpoints_.dueAfter(done, epochEnd, planned)) saveCheckpoint(done, summary);
    // Every rank learns whether any was sent SIGTERM (up to the step before), and all stop
    // after the same step.
    if (stopAgreement_ && done < planned && stopAgreed(done, summary)) break;
  }
  stopAgreement_.reset();  // completes the last exchange, on every rank
  if (checkpoints_.finalDue(step, plan_.firstStep)) saveCheckpoint(step, summary);
  finishSummary(step, samplesTrained, wallStart, summary);
  accountMemoryAt(step, summary);
  return summary;
}

}  // namespace ringtrain::training
