// CheckpointPolicy: when a training run saves and where it starts. A save falls due every
// --checkpoint-every steps (else at each epoch's end) before the last step, and once at the end
// unless that step was just saved; rank 0 writes it into --checkpoint-dir, --keep pruning only
// this run's. Rank 0 decides the start (--resume's checkpoint, --init-from's weights, or fresh)
// and every rank receives the decision.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "engine/timeline.h"
#include "models/model.h"
#include "storage/checkpoint.h"
#include "training/config.h"
#include "training/optimizer.h"
#include "training/training_checkpoint.h"
#include "training/training_reporter.h"

namespace ringtrain::training {

// How a run starts, as rank 0 decided.
enum class StartKind : std::int64_t { kFresh = 0, kResumed = 1, kRefused = 2, kInitialised = 3 };
struct StartDecision {
  StartKind kind = StartKind::kFresh;
  ResumePoint point;    // kResumed (its notes on rank 0 only)
  std::string refusal;  // kRefused: why, one line
};

// Collective: rank 0's `decision` on every rank.
void broadcastStartDecision(collectives::Communicator& comm, StartDecision& decision);

// A checkpoint rank 0 wrote.
struct SavedCheckpoint {
  std::string path;
  double seconds = 0;  // making its content and writing it
};

class CheckpointPolicy {
 public:
  // `config` is the trainer's and outlives this, as does `reporter`; `timeline` may be null.
  CheckpointPolicy(const TrainConfig& config, const TrainingReporter& reporter,
                   engine::Timeline* timeline);

  bool writes() const { return !config_.checkpointDir.empty(); }  // the same on every rank
  // Whether a checkpoint falls due after step `done` (`epochEnded`: an epoch ended in it).
  bool dueAfter(std::int64_t done, bool epochEnded, std::int64_t plannedSteps) const;
  // Whether the run, ended after `step`, still saves it.
  bool finalDue(std::int64_t step, std::int64_t firstStep) const {
    return step > firstStep && lastStep_ != step;
  }
  // The run's state after `step` is saved now, or (resumed) was saved before.
  void markSaved(std::int64_t step) { lastStep_ = step; }

  // Rank 0: writes `content()` as the checkpoint of `step` and logs it; a failure ends the job.
  SavedCheckpoint save(std::int64_t step,
                       const std::function<storage::CheckpointContent()>& content);
  // Rank 0: how the run starts. Resuming, restores the model and optimiser from the checkpoint;
  // with --init-from, the model's weights from that file. Never throws: a refusal is kRefused.
  StartDecision decideOnRoot(models::Model<float>& model, Optimizer& optimizer, int worldSize,
                             std::int64_t datasetSize);

 private:
  // The point to continue from, or nullopt for a fresh start; throws on a refusal.
  std::optional<ResumePoint> resumePoint(models::Model<float>& model, Optimizer& optimizer,
                                         int worldSize, std::int64_t datasetSize);
  // Throws when --checkpoint-dir holds checkpoints newer than `start` that --resume passed by.
  void refuseNewerCheckpoints(std::int64_t start, bool searchedTheFolder) const;
  // The options changed since the checkpoint, where this run keeps its files aside.
  void logChanges(const storage::ResumePlan& plan, int batchSize) const;
  // The weights of --init-from, if given (false: none given).
  bool initialiseFromFile(models::Model<float>& model) const;
  // One line, at the first checkpoint beside others: the checkpoints --keep does not prune.
  void logKeptOthers(const std::vector<std::filesystem::path>& others);

  const TrainConfig& config_;
  const TrainingReporter& reporter_;
  engine::Timeline* timeline_;
  // Rank 0's writer of --checkpoint-dir, made at the first checkpoint; it prunes only its own.
  std::optional<storage::CheckpointWriter> writer_;
  bool keptOthersLogged_ = false;  // the checkpoints --keep leaves alone are named once
  std::int64_t lastStep_ = -1;     // the step of this run's newest checkpoint
};

}  // namespace ringtrain::training
