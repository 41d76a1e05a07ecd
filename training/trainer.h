// Trainer: data-parallel training of one model over the ranks of an MPI communicator.
//
// Every rank holds the whole model. Rank 0 initialises the weights and broadcasts them; then,
// every step, each rank runs forward and backward on its own shard of the batch, and the
// gradient exchange (engine/gradient_exchange.h, made by engine::makeGradientExchange for the
// backend) averages the gradients bucket by bucket across the ranks — while backward is still
// running, with overlap on — and the optimiser updates each bucket's parameters as soon as its
// average is complete. Every rank applies the same updates,
// so the replicas stay identical to the bit, and N ranks with batch B per rank train exactly as
// one rank with batch N*B would (the sampler gives the ranks the same samples, and the loss is a
// per-batch mean). With --accumulate-steps K a step is K micro-batches of B: their gradients are
// summed on each rank (gradient_accumulator.h) and averaged once, after the last one's backward,
// so R ranks train as one rank with batch R*K*B.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <mpi.h>

#include "collectives/communicator.h"
#include "collectives/stall_watchdog.h"
#include "data/sharded_sampler.h"
#include "engine/gradient_exchange.h"
#include "engine/timeline.h"
#include "models/model.h"
#include "models/model_factory.h"
#include "options/consistency_check.h"
#include "storage/tensorboard_writer.h"
#include "training/batch_prefetcher.h"
#include "training/batch_source.h"
#include "training/checkpoint_policy.h"
#include "training/config.h"
#include "training/gpu_replica.h"
#include "training/gradient_accumulator.h"
#include "training/loss_watch.h"
#include "training/lr_schedule.h"
#include "training/memory_report.h"
#include "training/optimizer.h"
#include "training/periodic_evaluation.h"
#include "training/step_trace.h"
#include "training/stop_agreement.h"
#include "training/training_checkpoint.h"
#include "training/training_reporter.h"
#include "training/training_summary.h"

namespace ringtrain::training {

// TrainingStopped (loss_watch.h) is thrown on every rank, with the same text, when training must
// stop: --check-finite stop, or a diverged run (a non-finite loss or parameters).

// Thrown by Trainer::resume on every rank, with the same text, when the checkpoint to resume
// from is refused (damaged, another model, cannot be re-sharded onto this rank count).
class ResumeRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the program gives the trainer beside its configuration.
struct TrainerEnvironment {
  MPI_Comm comm = MPI_COMM_WORLD;
  bool log = true;  // rank 0 prints progress
  collectives::StallWatchdog* watchdog = nullptr;
  engine::Timeline* timeline = nullptr;
  // Called on every rank with what all ranks must agree on, before the first collective whose
  // shape depends on it (the weights' broadcast); it ends the job on a disagreement.
  std::function<void(const options::ConsistencyItems&)> checkConsistency;
  storage::TrainingLog* trainingLog = nullptr;  // --logdir, on rank 0 (null elsewhere)
  // Set by SIGTERM (SigtermHandler::received()). Non-null: the ranks compare their flags after
  // every step (StopAgreement) and stop together; null on one rank means null on all
  // (--sigterm-grace agrees).
  const std::atomic<bool>* stopRequested = nullptr;
};

class Trainer {
 public:
  // `config` must have its device and backend settled (chooseDevice, device_choice.h).
  Trainer(const TrainConfig& config, const BatchSource& train, const BatchSource& test,
          const TrainerEnvironment& environment = {});
  ~Trainer();

  // Everything all ranks must agree on: the options, the model's layout, the bucket plan.
  options::ConsistencyItems consistencyItems() const;
  // Lets `watchdog` watch this trainer's communicators until the trainer goes (the watchdog must
  // outlive the trainer).
  void watchWith(collectives::StallWatchdog& watchdog);
  // Collective; after construction, before run(). Continues from --resume: rank 0 reads the
  // checkpoint (with --resume auto, the newest of --checkpoint-dir that is good and that this run
  // can continue from: same layout and optimiser, a batch that re-shards), fits it to this
  // run (training/training_checkpoint.h) and broadcasts parameters, optimiser state and
  // position. Throws ResumeRefused on every rank when it cannot; also when --checkpoint-dir
  // holds checkpoints newer than where this run starts (a later --resume auto would take them
  // for this run's). A fresh start with --init-from takes rank 0's weights from that file
  // (exported_weights.h) instead, and is refused the same way when the file does not fit.
  void resume();
  TrainingSummary run();
  // On every rank: the test set's loss and accuracy, summed over the ranks. `whole`: every
  // sample, else --eval-samples of them (the run's last evaluation takes them all).
  models::BatchResult evaluate(bool whole = true);

  // The host model: with --device cuda the mirror of the GPU's, current after run() and resume().
  models::Model<float>& model() { return model_; }
  const engine::GradientExchange& exchange() const { return *exchange_; }
  const BatchPrefetcher& batches() const { return *batches_; }
  std::int64_t plannedSteps() const { return plan_.plannedSteps; }
  std::int64_t firstStep() const { return plan_.firstStep; }
  int batchSize() const { return config_.batchSize; }
  double baseLearningRate() const { return schedule_.baseLr; }
  const Optimizer& optimizer() const { return *optimizer_; }
  std::vector<std::span<float>> optimizerState() { return optimizer_->state(); }
  // The optimiser state this rank holds (with --zero 1 its shards'), for memory reports.
  std::size_t optimizerStateBytes() { return optimizer_->stateBytes(); }

 private:
  // The constructor's steps.
  void buildExchange();
  void startGpu();

  // One step: for each micro-batch, gather it, forward and backward (the last announcing each
  // layer's gradients to the exchange), then average and update. Returns this rank's samples.
  std::int64_t trainStep(std::int64_t step, TrainingSummary& summary);
  // `lastOfStep`: the step's last micro-batch.
  const HostBatch& nextBatch(std::int64_t step, bool lastOfStep);
  models::BatchResult computeGradients(const models::Batch<float>& input, std::int64_t step,
                                       bool lastOfStep);
  // The optimiser steps that train `batches` micro-batches: rounded up, the last step takes its
  // missing micro-batches from the epoch after.
  std::int64_t stepsForBatches(std::int64_t batches) const {
    return (batches + config_.accumulateSteps - 1) / config_.accumulateSteps;
  }
  // --test-fail-at: throws at `point` of step `step` (from 0) on the rank the test chose.
  void failIfAsked(FailurePoint point, std::int64_t step) const;
  // Hands every averaged bucket to the optimiser, unless --check-finite finds a NaN or infinity
  // (then "" is not returned but what was found, and --check-finite skip updates nothing).
  std::string averageAndUpdate(std::int64_t step, double& optimizerSeconds);
  // --clip-grad-norm: scales the averaged gradients down to that global norm when above it.
  void clipAveragedGradients();
  // ZeRO-1: the global norm of the averaged gradients from every rank's shards (collective).
  double shardedNorm();
  // ZeRO-1, on rank 0: an optimiser of every element, for the checkpoints' whole state (null on
  // the other ranks and without sharding).
  std::unique_ptr<Optimizer> wholeOptimizerOnRoot() const;
  void updateBucket(const engine::GradientBucket& bucket, float learningRate,
                    double& optimizerSeconds);
  // The first non-finite averaged value in `bucket`, as "the averaged gradient of fc1.weight
  // holds nan (element 3)", or "" when every value is finite.
  std::string firstNonFiniteIn(const engine::GradientBucket& bucket) const;
  // The tensor holding element `element` of the flat parameter buffer and the index in it.
  std::pair<std::string, std::size_t> parameterAt(std::size_t element) const;

  // run()'s steps.
  void logStart() const;
  void logTrainingWindow(std::int64_t done, std::int64_t epoch, TrainingSummary& summary);
  void evaluateAndLog(std::int64_t step, TrainingSummary& summary);
  // Collective: throws TrainingStopped on every rank when rank 0's parameters (which every
  // rank shares) hold a NaN or infinity, before a checkpoint of them is written.
  void stopIfParametersDiverged(std::int64_t step);
  // Whether every rank agrees to stop after step `done` (SIGTERM on any rank).
  bool stopAgreed(std::int64_t done, TrainingSummary& summary);
  void finishSummary(std::int64_t step, std::int64_t samplesTrained, std::int64_t wallStart,
                     TrainingSummary& summary);
  // Collective: every rank's memory into `summary`, and into --logdir's metrics.
  void accountMemoryAt(std::int64_t step, TrainingSummary& summary);

  // Rank 0 writes a checkpoint of the state after `step` steps (a failure aborts the job).
  void saveCheckpoint(std::int64_t step, TrainingSummary& summary);
  void continueAt(const ResumePoint& point);
  // --device cuda: the GPU's parameters and optimiser state into the host mirror.
  void downloadFromGpu();
  void reserveBatch(int batchSize);

  TrainConfig config_;
  const BatchSource& train_;
  const BatchSource& test_;
  TrainerEnvironment environment_;
  std::unique_ptr<collectives::Communicator> control_;  // broadcast, evaluation, logging
  TrainingReporter reporter_;
  PeriodicEvaluation evaluation_;
  CheckpointPolicy checkpoints_;
  StepTrace trace_;
  models::Model<float> model_;
  std::vector<int> segmentOfLayer_;  // per model layer: its gradient segment, or -1
  std::unique_ptr<engine::GradientExchange> exchange_;
  engine::StepBuffers buffers_;  // where backward writes and the averages appear, every step
  data::ShardedSampler sampler_;
  OptimizerOptions optimizerChoice_;
  // The elements optimizer_ keeps state for: all, or with --zero 1 this rank's shards.
  StateIndex stateIndex_;
  std::unique_ptr<Optimizer> optimizer_;  // with gpu_: the host mirror of the GPU optimiser
  std::unique_ptr<GpuReplica> gpu_;       // --device cuda, else null
  std::string deviceLine_;                // "device cuda: GPU 0 (...), ranks on GPUs 0,1"
  LrScheduleOptions schedule_;
  // With --accumulate-steps above 1: the sum of a step's earlier micro-batches' gradients.
  std::optional<GradientAccumulator> accumulator_;
  StepPlan plan_;
  std::unique_ptr<BatchPrefetcher> batches_;  // this rank's training batches, gathered
  // What the optimiser reads: the averaged gradients, or their clipped copy.
  std::span<const float> updateFrom_;
  std::vector<float> clipped_;
  std::optional<StopAgreement> stopAgreement_;  // during run(), with environment.stopRequested
};

// The model spec of a configuration and the data it trains on.
models::ModelSpec modelSpecFor(const TrainConfig& config, const BatchSource& train);

}  // namespace ringtrain::training
