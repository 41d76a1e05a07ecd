// TrainingReporter: what a training run tells while it trains -- rank 0's start lines, the
// progress line and "train" scalars of each logging window (its loss summed over the ranks), the
// evaluation lines and "test" scalars, the chance-level warning -- and the window's counters.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "collectives/communicator.h"
#include "models/model.h"
#include "storage/tensorboard_writer.h"
#include "training/batch_source.h"
#include "training/config.h"
#include "training/loss_watch.h"

namespace ringtrain::training {

// The optimiser steps a run trains.
struct StepPlan {
  std::int64_t firstStep = 0;      // > 0: a resumed run's first step
  std::int64_t plannedSteps = 0;   // the step the run ends after
  std::int64_t stepsPerEpoch = 0;  // the sampler's: (micro-)batches per epoch
};

class TrainingReporter {
 public:
  // `config` is the trainer's and outlives this (a resume may change its batch size). `log`:
  // rank 0 prints; `trainingLog`: --logdir, on rank 0 (null elsewhere).
  TrainingReporter(const TrainConfig& config, const BatchSource& train, const BatchSource& test,
                   collectives::Communicator& control, bool log, storage::TrainingLog* trainingLog);

  void log(const std::string& line) const;  // rank 0, info
  // Every rank, --log-level debug; `line` is made only when it will be shown.
  void debug(const std::function<std::string()>& line) const;
  // The run's first lines: what trains on how many ranks, the device (`deviceLine` unless empty),
  // the data.
  void logStart(const StepPlan& plan, std::size_t parameterCount, std::size_t buckets,
                const std::string& deviceLine, bool prefetchInBackground) const;
  // Whether a logging window ends after step `done`: every --log-every steps, and the last.
  bool windowEndsAfter(std::int64_t done, std::int64_t plannedSteps) const {
    return config_.logEvery > 0 && (done % config_.logEvery == 0 || done == plannedSteps);
  }
  // Starts the run's first window (and its elapsed time) at `startNs`.
  void beginRun(const StepPlan& plan, std::int64_t startNs);
  // A trained step's loss and accuracy (not a skipped step's), and its time.
  void countResult(const models::BatchResult& result);
  void countStep(double trainingSeconds, double reduceSeconds);
  // Collective: ends the window at step `done` (in epoch `epoch`, from 0, when it began), with
  // `learningRate` the last step's. Returns its mean loss over all ranks; throws TrainingStopped
  // on every rank when that is not finite.
  double logWindow(std::int64_t done, std::int64_t epoch, const StepPlan& plan,
                   double learningRate);
  // The evaluation after `step` steps, `epoch` epochs completed.
  void logEvaluation(const models::BatchResult& result, std::int64_t step,
                     std::int64_t epoch) const;
  // --logdir: the steps after `step` start again (a resumed run).
  void markResumed(std::int64_t step) const;

 private:
  // A language model's tokens per sample (its context); 0 for other models.
  std::int64_t tokensPerSample() const;
  void logScalars(std::string_view split, std::int64_t step,
                  std::initializer_list<storage::Scalar> scalars) const;
  void logTrainScalars(std::int64_t done, double loss, double accuracy, double learningRate,
                       double rate, double reduceMs) const;

  // Since the last log line: this rank's sum of per-sample losses, its samples and correct
  // answers, and the steps, their training time and their all-reduce time.
  struct Window {
    double loss = 0;
    std::int64_t samples = 0;
    std::int64_t correct = 0;
    std::int64_t predictions = 0;
    std::int64_t steps = 0;
    double seconds = 0;
    double reduceSeconds = 0;
  };

  const TrainConfig& config_;
  const BatchSource& train_;
  const BatchSource& test_;
  collectives::Communicator& control_;
  bool log_;        // rank 0 prints
  bool logsDebug_;  // the program logs (every rank)
  storage::TrainingLog* trainingLog_;
  Window window_;
  std::optional<LossWatch> lossWatch_;  // during run(): the chance-level warning
  std::int64_t runStartNs_ = 0;         // for the progress line's elapsed time
};

}  // namespace ringtrain::training
