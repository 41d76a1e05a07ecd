#include "src/trainer/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>
#include <variant>

#include "base/fingerprint.h"
#include "base/log.h"
#include "collectives/mpi_check.h"
#include "base/steady_clock.h"
#include "engine/exchange_factory.h"
#include "models/matrix_products.h"
#include "src/storage/checkpoint.h"
#include "src/trainer/device_choice.h"
#include "src/trainer/evaluation.h"
#include "src/trainer/exported_weights.h"
#include "src/trainer/model_memory.h"
#include "src/trainer/run_report.h"
#include "src/trainer/stop_agreement.h"

namespace ringtrain {
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
      log_(environment.log && control_->rank() == 0),
      model_(allocateModel(config, modelSpecFor(config, train))),
      sampler_(samplerOptions(config, train.size(), *control_)) {
  // Process-wide (models/matrix_products.h): every product this trainer's model computes.
  if (config.precision == models::Precision::kBfloat16 && !models::bf16ProductsSupported())
    throw std::runtime_error("--precision bf16 needs a CPU with AVX512-BF16 instructions");
  models::setMatrixPrecision(config.precision);
  stepsPerEpoch_ = sampler_.stepsPerEpoch();
  plannedSteps_ = config.steps > 0 ? config.steps : stepsForBatches(config.epochs * stepsPerEpoch_);
  OptimizerOptions optimizerChoice = optimizerOptions(config);
  optimizerChoice.undecayed = undecayedRanges(config, model_);
  optimizer_ = makeOptimizer(optimizerChoice, model_.parameterCount());
  buildExchange();
  if (environment_.watchdog) watchWith(*environment_.watchdog);

  // Before the first collective that depends on the layout: ranks that disagree are told so
  // here, by name, rather than in a broadcast of mismatched sizes.
  if (environment_.checkConsistency) environment_.checkConsistency(consistencyItems());
  // Rank 0's weights, everywhere: one broadcast of the flat buffer.
  if (control_->rank() == 0) model_.initialize(config.seed);
  control_->broadcast(model_.parameters(), 0);

  if (config.device == Device::kCuda) startGpu();
  reserveBatch(config.batchSize);
  schedule_.kind = config.lrSchedule;
  schedule_.baseLr = config.learningRate * (config.scaleLr ? control_->size() : 1);
  schedule_.warmupSteps = config.warmupSteps;
  schedule_.stepSize = config.lrStepSize;
  schedule_.gamma = config.lrGamma;
  schedule_.totalSteps = plannedSteps_;
  if (environment_.timeline) observeLayersForTimeline();
  batches_ = std::make_unique<BatchPrefetcher>(
      train, prefetchesInBackground(config, train.readsStorage()));
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
  if (config_.device == Device::kCuda) return;  // startGpu brings the device buffers
  buffers_ = exchange_->hostBuffers(model_.gradients());
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
  gpu_ = makeGpuReplica(model_, optimizerOptions(config_), config_.tf32, *gradients);
  buffers_ = {gpu_->gradients(), gpu_->averaged()};
  std::vector<std::int32_t> devices(static_cast<std::size_t>(control_->size()));
  const std::int32_t mine = gpu_->deviceIndex();
  control_->allgather(&mine, devices.data(), 1, collectives::DataType::kInt32);
  deviceLine_ = fmt::format("device cuda{}: rank 0 on {}; GPU index per rank: {}",
                            config_.tf32 ? " (TF32 matrix products)" : "", gpu_->describe(),
                            fmt::join(devices, ","));
}

void Trainer::observeLayersForTimeline() {
  for (int i = 0; i < model_.layerCount(); ++i) {
    layerSpanNames_.push_back("forward " + model_.layer(i).name());
    layerSpanNames_.push_back("backward " + model_.layer(i).name());
  }
  layerStarts_.assign(layerSpanNames_.size(), 0);
  for (const engine::GradientBucket& b : exchange_->buckets()) {
    optimizerSpanNames_.push_back("optimizer " + b.name);
  }
  model_.setLayerObserver([this](int layer, models::LayerPhase phase, bool begins) {
    const std::size_t slot =
        2 * static_cast<std::size_t>(layer) + (phase == models::LayerPhase::kBackward ? 1 : 0);
    if (begins) {
      layerStarts_[slot] = steadyNowNs();
    } else {
      traceSpan(layerSpanNames_[slot],
                phase == models::LayerPhase::kForward ? "forward" : "backward", layerStarts_[slot]);
    }
  });
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

ConsistencyItems Trainer::consistencyItems() const {
  ConsistencyItems items = comparableOptions(config_);
  items.emplace_back("ranks", std::to_string(control_->size()));
  // --data may differ from node to node, the data it holds may not; compared before the model,
  // whose layout follows from it.
  for (const auto* source : {&train_, &test_}) {
    for (auto& item : dataFacts(*source, source == &train_ ? "train data" : "test data"))
      items.push_back(std::move(item));
  }
  for (auto& item : itemsFromLines("model", model_.describe()))
    items.push_back(std::move(item));
  for (auto& item : itemsFromLines("bucket plan", exchange_->describePlan())) {
    items.push_back(std::move(item));
  }
  return items;
}

void Trainer::log(const std::string& line) const {
  if (log_) logLine(LogLevel::kInfo, line);
}

void Trainer::debug(const std::function<std::string()>& line) const {
  if (environment_.log && logs(LogLevel::kDebug)) {
    logLine(LogLevel::kDebug, line());
  }
}

void Trainer::traceSpan(std::string_view name, std::string_view category,
                        std::int64_t start) const {
  if (environment_.timeline) {
    environment_.timeline->span(name, category, start, steadyNowNs());
  }
}

const HostBatch& Trainer::nextBatch(std::int64_t step, bool lastOfStep) {
  const std::span<const std::int64_t> indices = sampler_.next();
  HostBatch& host = batches_->take(indices);
  // The next batch is gathered while this one trains (--prefetch); not past the last step.
  if (step + 1 < plannedSteps_ || !lastOfStep) batches_->prefetch(sampler_.peek());
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
  traceSpan(optimizerSpanNames_.empty() ? std::string_view("optimizer")
                                        : std::string_view(optimizerSpanNames_[b.index]),
            "optimizer", t0);
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
    if (!deferUpdates) updateBucket(b, lr, optimizerSeconds);
    failIfAsked(FailurePoint::kOptimizer, step);
  });
  if (!problem.empty()) return fmt::format("step {}: {}", step + 1, problem);
  if (clip) clipAveragedGradients();
  if (deferUpdates) {
    for (const engine::GradientBucket& b : exchange_->buckets())
      updateBucket(b, lr, optimizerSeconds);
  }
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
  const double norm = globalNorm(averaged);
  if (!(norm > config_.clipGradNorm)) return;
  const auto scale = static_cast<float>(config_.clipGradNorm / (norm + 1e-6));
  clipped_.resize(averaged.size());
  for (std::size_t i = 0; i < averaged.size(); ++i)
    clipped_[i] = averaged[i] * scale;
  updateFrom_ = clipped_;
}

std::int64_t Trainer::trainStep(std::int64_t step, TrainingSummary& summary) {
  const std::int64_t start = steadyNowNs();
  models::BatchResult result;
  std::int64_t samples = 0;
  for (int micro = 0; micro < config_.accumulateSteps; ++micro) {
    const bool last = micro + 1 == config_.accumulateSteps;
    const std::int64_t begun = steadyNowNs();
    const HostBatch& batch = nextBatch(step, last);
    const models::Batch<float> input = batchView(batch, train_);
    const std::int64_t gathered = steadyNowNs();
    traceSpan("data", "data", begun);
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
    log("skipping " + problem + " (--check-finite skip)");
    ++summary.skippedSteps;
  }
  if (gpu_) result.add(gpu_->lastResult());
  const std::int64_t finished = steadyNowNs();

  summary.waitSeconds += exchange_->lastWaitSeconds();
  summary.reduceSeconds += exchange_->lastReduceSeconds();
  summary.optimizerSeconds += optimizerSeconds;
  summary.trainingSeconds += secondsBetween(start, finished);
  // A skipped step's loss (of a batch that made the gradients non-finite) is not the model's.
  if (problem.empty()) {
    windowLoss_ += result.lossSum;
    windowSamples_ += result.samples;
    windowCorrect_ += result.correct;
    windowPredictions_ += result.predictions;
  }
  return samples;
}

models::BatchResult Trainer::evaluate(bool whole) {
  const std::int64_t start = steadyNowNs();
  // --eval-samples N: N samples spread evenly over the test set (sample j·size/N), so that a
  // test set in file order (the fortunes, file by file) is not judged by its first file.
  const std::int64_t size = test_.size();
  const std::int64_t samples =
      config_.evalSamples > 0 && !whole ? std::min(config_.evalSamples, size) : size;
  const models::BatchResult global = evaluateTestSet(
      test_, samples, config_.batchSize, *control_, [this](const models::Batch<float>& view) {
        return gpu_ ? gpu_->evaluate(view) : model_.evaluate(view);
      });
  traceSpan("evaluation", "evaluation", start);
  return global;
}

namespace {

// A resume decision crosses the ranks as int64 words: what it is, the ResumePoint's numbers,
// and for a refusal its text, packed into words.
enum ResumeKind : std::int64_t { kFreshStart = 0, kResumed = 1, kRefused = 2, kInitialised = 3 };

void broadcastText(collectives::Communicator& comm, std::string& text) {
  std::int64_t length = static_cast<std::int64_t>(text.size());
  comm.broadcast(std::span<std::int64_t>(&length, 1), 0);
  if (length == 0) return;
  std::vector<std::int64_t> words(static_cast<std::size_t>(length + 7) / 8, 0);
  if (comm.rank() == 0) std::memcpy(words.data(), text.data(), text.size());
  comm.broadcast(std::span<std::int64_t>(words), 0);
  text.assign(reinterpret_cast<const char*>(words.data()), static_cast<std::size_t>(length));
}

// A saved configuration without its "# ..." lines, to compare with this run's configLines.
std::string withoutComments(std::string_view text) {
  std::string kept;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    if (!text.starts_with("#")) kept.append(text.substr(0, end)).append("\n");
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return kept;
}

}  // namespace

void Trainer::resume() {
  std::array<std::int64_t, 7> words{};
  std::string refusal;
  if (control_->rank() == 0) {
    std::optional<ResumePoint> point;
    bool initialised = false;
    try {
      point = resumePointOnRoot();
      initialised = !point && initialiseFromFileOnRoot();
    } catch (const std::exception& e) {
      refusal = e.what();
    }
    words[0] = !refusal.empty() ? kRefused
               : point          ? kResumed
               : initialised    ? kInitialised
                                : kFreshStart;
    if (point) {
      words = {kResumed,
               point->step,
               point->sampler.epoch,
               point->sampler.step,
               point->optimizerSteps,
               point->batchSize,
               std::bit_cast<std::int64_t>(point->baseLr)};
    }
  }
  control_->broadcast(std::span<std::int64_t>(words), 0);
  if (words[0] == kRefused) {
    broadcastText(*control_, refusal);
    throw ResumeRefused(refusal);
  }
  if (words[0] == kFreshStart) return;
  // Rank 0 has restored its model (and, resuming, its optimiser) from the file; the others take
  // them from it.
  control_->broadcast(model_.parameters(), 0);
  if (words[0] == kInitialised) {
    if (gpu_) gpu_->upload(model_, *optimizer_);
    return;
  }
  for (const std::span<float> state : optimizer_->state())
    control_->broadcast(state, 0);
  ResumePoint point;
  point.step = words[1];
  point.sampler = {words[2], words[3]};
  point.optimizerSteps = words[4];
  point.batchSize = static_cast<int>(words[5]);
  point.baseLr = std::bit_cast<double>(words[6]);
  continueAt(point);
  if (gpu_) gpu_->upload(model_, *optimizer_);
}

std::optional<ResumePoint> Trainer::resumePointOnRoot() {
  namespace fs = std::filesystem;
  // Every reason this run cannot continue from a checkpoint is found while choosing it, so that
  // --resume auto passes over one of another optimiser as it does over a damaged one.
  std::optional<ResumePoint> point;
  const storage::TakeCheckpoint take = [&](const storage::CheckpointContent& saved,
                                           const fs::path& file) {
    auto decision = planResume(saved, config_, control_->size(), train_.size());
    if (const std::string* refusal = std::get_if<std::string>(&decision)) {
      throw storage::CheckpointError(file.string() + ": " + *refusal);
    }
    restoreCheckpoint(saved, model_, *optimizer_, nameIn(kOptimizerNames, config_.optimizer), file);
    point = std::get<ResumePoint>(decision);
  };
  std::optional<storage::ResumePlan> plan;
  if (config_.resume != "none") {
    plan = storage::resolveResume(config_.resume, config_.checkpointDir, model_.describe(), take);
  }
  const std::int64_t start = plan ? plan->content.step : 0;
  // Checkpoints of --checkpoint-dir newer than this run's start would be taken for this run's by
  // a later --resume auto (and keep-N would prune this run's first). With --resume auto (or the
  // folder itself) every newer one was unreadable or unusable here, and was reported as skipped.
  std::error_code ec;
  const bool searchedTheFolder =
      plan && !config_.checkpointDir.empty() &&
      (config_.resume == "auto" || fs::equivalent(config_.resume, config_.checkpointDir, ec));
  if (!config_.checkpointDir.empty() && !searchedTheFolder) {
    const std::vector<std::int64_t> steps = storage::checkpointSteps(config_.checkpointDir);
    if (!steps.empty() && steps.front() > start) {
      throw storage::CheckpointError(fmt::format(
          "--checkpoint-dir {} already holds checkpoints up to step {} ({}), newer than this "
          "run's start at step {}: continue them with --resume auto, or move them away",
          config_.checkpointDir, steps.front(), storage::checkpointFileName(steps.front()), start));
    }
  }
  if (!plan) {
    if (config_.resume == "auto") {
      log("no checkpoint in " + config_.checkpointDir + " yet: starting from step 0");
    }
    return std::nullopt;
  }
  log(storage::describeResume(*plan));
  TrainConfig resumed = config_;
  resumed.batchSize = point->batchSize;
  // Where this run keeps its files is no change worth a line.
  std::string changes;
  for (const std::string& change :
       storage::configChanges(withoutComments(plan->content.config), configLines(resumed))) {
    const bool whereFilesGo = change.starts_with("checkpoint-dir:") ||
                              change.starts_with("checkpoint-every:") ||
                              change.starts_with("keep:") || change.starts_with("logdir:");
    if (!whereFilesGo) changes += (changes.empty() ? "" : "; ") + change;
  }
  if (!changes.empty()) log("options changed since that checkpoint: " + changes);
  for (const std::string& note : point->notes)
    log(note);
  if (environment_.trainingLog) environment_.trainingLog->markResumed(point->step);
  return point;
}

bool Trainer::initialiseFromFileOnRoot() {
  if (config_.initFrom.empty()) return false;
  loadWeightsFile(config_.initFrom, model_);
  log("initial weights from " + config_.initFrom + " (" +
      std::to_string(model_.parameterTable().size()) + " tensors)");
  return true;
}

void Trainer::continueAt(const ResumePoint& point) {
  firstStep_ = point.step;
  lastCheckpointStep_ = point.step;
  optimizer_->restoreSteps(point.optimizerSteps);
  if (point.batchSize != config_.batchSize) {
    config_.batchSize = point.batchSize;
    reserveBatch(config_.batchSize);
  }
  sampler_ = data::ShardedSampler(samplerOptions(config_, train_.size(), *control_), point.sampler);
  stepsPerEpoch_ = sampler_.stepsPerEpoch();
  if (config_.steps > 0) {
    plannedSteps_ = std::max(config_.steps, firstStep_);
  } else {
    // The rest of this epoch and the epochs after it, in this run's layout.
    const data::SamplerPosition at = sampler_.position();
    const std::int64_t left =
        config_.epochs * stepsPerEpoch_ - (at.epoch * stepsPerEpoch_ + at.step);
    plannedSteps_ = firstStep_ + stepsForBatches(std::max<std::int64_t>(0, left));
  }
  schedule_.baseLr = point.baseLr;
  schedule_.totalSteps = plannedSteps_;
}

void Trainer::saveCheckpoint(std::int64_t step, TrainingSummary& summary) {
  failIfAsked(FailurePoint::kCheckpoint, step - 1);
  lastCheckpointStep_ = step;
  stopIfParametersDiverged(step);  // downloads a GPU's parameters on rank 0
  if (control_->rank() != 0 || config_.checkpointDir.empty()) return;
  const std::int64_t start = steadyNowNs();
  storage::CheckpointWriteResult written;
  try {
    if (!checkpointWriter_) checkpointWriter_.emplace(config_.checkpointDir, config_.keep);
    written = checkpointWriter_->write(checkpointContent(model_, *optimizer_, config_, step,
                                                         sampler_.position(), control_->size(),
                                                         schedule_.baseLr));
  } catch (const std::exception& e) {
    // The checkpoints written before are intact; training on without the ones asked for could
    // throw hours away at the next failure.
    collectives::abortJob(fmt::format("error: checkpoint at step {}: {}", step, e.what()));
  }
  traceSpan("checkpoint", "checkpoint", start);
  const double seconds = secondsBetween(start, steadyNowNs());
  ++summary.checkpoints;
  summary.checkpointSeconds += seconds;
  summary.lastCheckpoint = written.path.string();
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(written.path, ec);
  log(fmt::format("checkpoint {} written ({:.1f} MB in {:.1f} ms)", written.path.string(),
                  ec ? 0.0 : static_cast<double>(bytes) / 1e6, seconds * 1e3));
  for (const std::string& warning : written.warnings)
    log("warning: " + warning);
  logKeptOthers(written.keptOthers);
}

void Trainer::logKeptOthers(const std::vector<std::filesystem::path>& others) {
  if (others.empty() || keptOthersLogged_ || config_.keep == 0) return;
  keptOthersLogged_ = true;
  std::string names;
  for (const std::filesystem::path& other : others)
    names += (names.empty() ? "" : ", ") + other.filename().string();
  log(
      fmt::format("--keep {} prunes only this run's checkpoints: {} other(s) in {} stay ({}); "
                  "remove them by hand when they are no longer needed",
                  config_.keep, others.size(), config_.checkpointDir, names));
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

void Trainer::logScalars(std::string_view split, std::int64_t step,
                         std::initializer_list<storage::Scalar> scalars) const {
  if (environment_.trainingLog && control_->rank() == 0) {
    environment_.trainingLog->write(split, step, scalars);
  }
}

void Trainer::logStart() const {
  const int k = config_.accumulateSteps;
  const std::int64_t globalBatch =
      static_cast<std::int64_t>(config_.batchSize) * control_->size() * k;
  const std::string perRank =
      k > 1 ? fmt::format("{} micro-batches of {} per rank", k, config_.batchSize)
            : fmt::format("{} per rank", config_.batchSize);
  log(
      fmt::format("training {} ({} parameters) on {} rank(s), backend {}: {} steps of {} samples "
                  "({}), {} {} per epoch; {} gradient bucket(s) up to {} KiB, "
                  "overlap {}, compression {}",
                  nameIn(kModelNames, config_.model), model_.parameterCount(), control_->size(),
                  engine::name(gradientBackend(config_)),
                  firstStep_ > 0 ? fmt::format("{} (from {} to {})", plannedSteps_ - firstStep_,
                                               firstStep_ + 1, plannedSteps_)
                                 : std::to_string(plannedSteps_),
                  globalBatch, perRank, stepsPerEpoch_, k > 1 ? "micro-batches" : "steps",
                  exchange_->buckets().size(), config_.fusionThresholdBytes >> 10,
                  config_.overlap ? "on" : "off", engine::name(config_.compression)));
  if (!deviceLine_.empty()) log(deviceLine_);
  log("data: " + train_.describe() + "; test: " + test_.describe() +
      (batches_->background() ? "; next batch prefetched on a thread of its own" : ""));
}

void Trainer::evaluateAndLog(std::int64_t step, TrainingSummary& summary) {
  summary.lastEvaluation = evaluate(/*whole=*/step == plannedSteps_);
  const std::int64_t epoch = sampler_.position().epoch;  // epochs completed
  const models::BatchResult& result = summary.lastEvaluation;
  stopIfDiverged("the test loss", result.meanLoss(), step);
  const EvaluationKind kind = evaluationKind(tokensPerSample(), train_);
  log(evaluationLine(result, kind, step, epoch));
  if (kind == EvaluationKind::kRegression) {
    logScalars("test", step, {{"loss", result.meanLoss()}});
  } else {
    logScalars("test", step, {{"loss", result.meanLoss()}, {"accuracy", result.accuracy()}});
  }
}

void Trainer::logTrainingWindow(std::int64_t done, std::int64_t epoch, TrainingSummary& summary) {
  failIfAsked(FailurePoint::kLogging, done - 1);
  // The loss over the window, all ranks: one small all-reduce every logEvery steps.
  std::array<double, 4> window = {windowLoss_, static_cast<double>(windowSamples_),
                                  static_cast<double>(windowCorrect_),
                                  static_cast<double>(windowPredictions_)};
  control_->allreduce(std::span<double>(window), collectives::ReduceOp::kSum);
  summary.lastTrainingLoss = window[1] > 0 ? window[0] / window[1] : 0;
  stopIfDiverged("the training loss", summary.lastTrainingLoss, done);
  const double rate = window[1] / std::max(windowSeconds_, 1e-9);
  const double lr = learningRateAt(schedule_, done - 1);
  Progress progress;
  progress.step = done;
  progress.steps = plannedSteps_;
  progress.firstStep = firstStep_;
  progress.epoch = epoch + 1;
  // The epoch under way when the last step starts (its micro-batches may reach into the next).
  const std::int64_t lastStepStart = (plannedSteps_ - 1) * config_.accumulateSteps;
  progress.epochs = lastStepStart / std::max<std::int64_t>(1, stepsPerEpoch_) + 1;
  progress.loss = summary.lastTrainingLoss;
  progress.learningRate = lr;
  progress.samplesPerSecond = rate;
  progress.tokensPerSample = tokensPerSample();
  progress.ranks = control_->size();
  progress.elapsedSeconds = secondsBetween(runStartNs_, steadyNowNs());
  log(progressLine(progress));
  if (log_ && window[1] > 0) {
    const auto warning = lossWatch_->observe(done - windowSteps_, done, summary.lastTrainingLoss);
    if (warning) logLine(LogLevel::kWarn, *warning);
  }
  const double reduceMs = 1e3 * windowReduceSeconds_ / static_cast<double>(windowSteps_);
  // This rank's own pace: the slow rank of a job is the one whose steps take longest.
  debug([&] {
    return fmt::format(
        "this rank, steps {} to {}: {:.2f} ms per step, of which {:.2f} ms "
        "waiting for averaged gradients",
        done - windowSteps_ + 1, done, 1e3 * windowSeconds_ / static_cast<double>(windowSteps_),
        reduceMs);
  });
  if (isClassification()) {
    logScalars("train", done,
               {{"loss", summary.lastTrainingLoss},
                {"accuracy", window[3] > 0 ? window[2] / window[3] : 0},
                {"learning_rate", lr},
                {"samples_per_second", rate},
                {"allreduce_ms", reduceMs}});
  } else {
    logScalars("train", done,
               {{"loss", summary.lastTrainingLoss},
                {"learning_rate", lr},
                {"samples_per_second", rate},
                {"allreduce_ms", reduceMs}});
  }
  windowLoss_ = 0;
  windowSamples_ = 0;
  windowCorrect_ = 0;
  windowPredictions_ = 0;
  windowSeconds_ = 0;
  windowReduceSeconds_ = 0;
  windowSteps_ = 0;
}

void Trainer::stopIfDiverged(std::string_view what, double loss, std::int64_t step) const {
  if (!std::isfinite(loss))
    throw TrainingStopped(divergenceMessage(what, loss, step, config_.learningRate));
}

void Trainer::stopIfParametersDiverged(std::int64_t step) {
  if (config_.checkpointDir.empty()) return;  // nothing is written (the same on every rank)
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
    log(fmt::format("SIGTERM: stopping after step {} of {}", done, plannedSteps_));
    summary.stoppedBySigterm = true;
  }
  return stop;
}

void Trainer::finishSummary(std::int64_t step, std::int64_t samplesTrained, std::int64_t wallStart,
                            TrainingSummary& summary) {
  summary.steps = step - firstStep_;
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

TrainingSummary Trainer::run() {
  TrainingSummary summary;
  summary.firstStep = firstStep_;
  const std::int64_t wallStart = steadyNowNs();
  runStartNs_ = wallStart;
  logStart();
  std::int64_t samplesTrained = 0;
  if (environment_.stopRequested) stopAgreement_.emplace(environment_.comm);
  lossWatch_.emplace(train_.classes(), std::max(firstStep_, config_.warmupSteps),
                     config_.learningRate);
  std::int64_t step = firstStep_;
  while (step < plannedSteps_) {
    const data::SamplerPosition at = sampler_.position();
    const double before = summary.trainingSeconds;
    const double reducedBefore = summary.reduceSeconds;
    const std::int64_t samples = trainStep(step, summary);
    if (config_.test.stepSleepMs > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(config_.test.stepSleepMs));
    }
    windowSeconds_ += summary.trainingSeconds - before;
    windowReduceSeconds_ += summary.reduceSeconds - reducedBefore;
    ++windowSteps_;
    samplesTrained += samples * control_->size();

    const std::int64_t done = ++step;
    if (config_.logEvery > 0 && (done % config_.logEvery == 0 || done == plannedSteps_)) {
      logTrainingWindow(done, at.epoch, summary);
    }
    const bool epochEnd = sampler_.position().epoch > at.epoch;  // an epoch ended in the step
    const bool periodic = config_.evalEvery > 0 && done % config_.evalEvery == 0;
    if (epochEnd || periodic || done == plannedSteps_) evaluateAndLog(done, summary);
    const bool checkpointDue =
        config_.checkpointEvery > 0 ? done % config_.checkpointEvery == 0 : epochEnd;
    if (checkpointDue && done < plannedSteps_) saveCheckpoint(done, summary);
    // Every rank learns whether any was sent SIGTERM (up to the step before), and all stop
    // after the same step.
    if (stopAgreement_ && done < plannedSteps_ && stopAgreed(done, summary)) break;
  }
  stopAgreement_.reset();  // completes the last exchange, on every rank
  if (step > firstStep_ && lastCheckpointStep_ != step) saveCheckpoint(step, summary);
  finishSummary(step, samplesTrained, wallStart, summary);
  return summary;
}

}  // namespace ringtrain
