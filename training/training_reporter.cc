#include "training/training_reporter.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <span>

#include "base/log.h"
#include "base/steady_clock.h"
#include "engine/exchange_factory.h"
#include "training/device_choice.h"
#include "training/evaluation.h"
#include "training/run_report.h"

namespace ringtrain::training {

TrainingReporter::TrainingReporter(const TrainConfig& config, const BatchSource& train,
                                   const BatchSource& test, collectives::Communicator& control,
                                   bool log, storage::TrainingLog* trainingLog)
    : config_(config),
      train_(train),
      test_(test),
      control_(control),
      log_(log && control.rank() == 0),
      logsDebug_(log),
      trainingLog_(trainingLog) {}

void TrainingReporter::log(const std::string& line) const {
  if (log_) logLine(LogLevel::kInfo, line);
}

void TrainingReporter::debug(const std::function<std::string()>& line) const {
  if (logsDebug_ && logs(LogLevel::kDebug)) logLine(LogLevel::kDebug, line());
}

std::int64_t TrainingReporter::tokensPerSample() const {
  return config_.model == ModelKind::kGpt ? config_.gpt.context : 0;
}

void TrainingReporter::logScalars(std::string_view split, std::int64_t step,
                                  std::initializer_list<storage::Scalar> scalars) const {
  if (trainingLog_ && control_.rank() == 0) trainingLog_->write(split, step, scalars);
}

void TrainingReporter::markResumed(std::int64_t step) const {
  if (trainingLog_) trainingLog_->markResumed(step);
}

void TrainingReporter::logStart(const StepPlan& plan, std::size_t parameterCount,
                                std::size_t buckets, const std::string& deviceLine,
                                bool prefetchInBackground) const {
  const int k = config_.accumulateSteps;
  const std::int64_t globalBatch =
      static_cast<std::int64_t>(config_.batchSize) * control_.size() * k;
  const std::string perRank =
      k > 1 ? fmt::format("{} micro-batches of {} per rank", k, config_.batchSize)
            : fmt::format("{} per rank", config_.batchSize);
  const std::int64_t first = plan.firstStep;
  const std::int64_t planned = plan.plannedSteps;
  log(fmt::format(
      "training {} ({} parameters) on {} rank(s), backend {}: {} steps of {} samples "
      "({}), {} {} per epoch; {} gradient bucket(s) up to {} KiB, "
      "overlap {}, compression {}",
      nameIn(kModelNames, config_.model), parameterCount, control_.size(),
      engine::name(gradientBackend(config_)),
      first > 0 ? fmt::format("{} (from {} to {})", planned - first, first + 1, planned)
                : std::to_string(planned),
      globalBatch, perRank, plan.stepsPerEpoch, k > 1 ? "micro-batches" : "steps", buckets,
      config_.exchange.fusionThresholdBytes >> 10, config_.exchange.overlap ? "on" : "off",
      engine::name(config_.exchange.compression)));
  if (!deviceLine.empty()) log(deviceLine);
  log("data: " + train_.describe() + "; test: " + test_.describe() +
      (prefetchInBackground ? "; next batch prefetched on a thread of its own" : ""));
}

void TrainingReporter::beginRun(const StepPlan& plan, std::int64_t startNs) {
  runStartNs_ = startNs;
  lossWatch_.emplace(train_.classes(), std::max(plan.firstStep, config_.warmupSteps),
                     config_.learningRate);
}

void TrainingReporter::countResult(const models::BatchResult& result) {
  window_.loss += result.lossSum;
  window_.samples += result.samples;
  window_.correct += result.correct;
  window_.predictions += result.predictions;
}

void TrainingReporter::countStep(double trainingSeconds, double reduceSeconds) {
  window_.seconds += trainingSeconds;
  window_.reduceSeconds += reduceSeconds;
  ++window_.steps;
}

double TrainingReporter::logWindow(std::int64_t done, std::int64_t epoch, const StepPlan& plan,
                                   double learningRate) {
  // The loss over the window, all ranks: one small all-reduce every logEvery steps.
  std::array<double, 4> totals = {window_.loss, static_cast<double>(window_.samples),
                                  static_cast<double>(window_.correct),
                                  static_cast<double>(window_.predictions)};
  control_.allreduce(std::span<double>(totals), collectives::ReduceOp::kSum);
  const double loss = totals[1] > 0 ? totals[0] / totals[1] : 0;
  stopIfDiverged("the training loss", loss, done, config_.learningRate);
  const double rate = totals[1] / std::max(window_.seconds, 1e-9);
  Progress progress;
  progress.step = done;
  progress.steps = plan.plannedSteps;
  progress.firstStep = plan.firstStep;
  progress.epoch = epoch + 1;
  // The epoch under way when the last step starts (its micro-batches may reach into the next).
  const std::int64_t lastStepStart = (plan.plannedSteps - 1) * config_.accumulateSteps;
  progress.epochs = lastStepStart / std::max<std::int64_t>(1, plan.stepsPerEpoch) + 1;
  progress.loss = loss;
  progress.learningRate = learningRate;
  progress.samplesPerSecond = rate;
  progress.tokensPerSample = tokensPerSample();
  progress.ranks = control_.size();
  progress.elapsedSeconds = static_cast<double>(steadyNowNs() - runStartNs_) * 1e-9;
  log(progressLine(progress));
  if (log_ && totals[1] > 0) {
    const auto warning = lossWatch_->observe(done - window_.steps, done, loss);
    if (warning) logLine(LogLevel::kWarn, *warning);
  }
  const double steps = static_cast<double>(window_.steps);
  const double reduceMs = 1e3 * window_.reduceSeconds / steps;
  // This rank's own pace: the slow rank of a job is the one whose steps take longest.
  debug([&] {
    return fmt::format(
        "this rank, steps {} to {}: {:.2f} ms per step, of which {:.2f} ms "
        "waiting for averaged gradients",
        done - window_.steps + 1, done, 1e3 * window_.seconds / steps, reduceMs);
  });
  logTrainScalars(done, loss, totals[3] > 0 ? totals[2] / totals[3] : 0, learningRate, rate,
                  reduceMs);
  window_ = {};
  return loss;
}

void TrainingReporter::logTrainScalars(std::int64_t done, double loss, double accuracy,
                                       double learningRate, double rate, double reduceMs) const {
  if (train_.classes() > 0) {
    logScalars("train", done,
               {{"loss", loss},
                {"accuracy", accuracy},
                {"learning_rate", learningRate},
                {"samples_per_second", rate},
                {"allreduce_ms", reduceMs}});
  } else {
    logScalars("train", done,
               {{"loss", loss},
                {"learning_rate", learningRate},
                {"samples_per_second", rate},
                {"allreduce_ms", reduceMs}});
  }
}

void TrainingReporter::logEvaluation(const models::BatchResult& result, std::int64_t step,
                                     std::int64_t epoch) const {
  const EvaluationKind kind = evaluationKind(tokensPerSample(), train_);
  log(evaluationLine(result, kind, step, epoch));
  if (kind == EvaluationKind::kRegression) {
    logScalars("test", step, {{"loss", result.meanLoss()}});
  } else {
    logScalars("test", step, {{"loss", result.meanLoss()}, {"accuracy", result.accuracy()}});
  }
}

}  // namespace ringtrain::training
