// Between a training run and its checkpoints (storage/checkpoint.h): what goes into one, and
// how a saved run continues here -- exactly on the same number of ranks, re-sharded on another.
//
// The state of a run is: the parameters, the optimiser's buffers and step count, the step, and
// the sampler's position (epoch, step within the epoch). Nothing else is random during training:
// the data order of an epoch is a permutation drawn from (seed, epoch), so the checkpoint's
// rng_state holds the seed of that epoch's generator, a check rather than a state to restore.
//
// Resuming on another number of ranks (a job that grows or shrinks). The sampler's layout makes
// the ranks of step s train on positions [s·G, (s+1)·G) of the epoch's permutation, G the global
// batch, whatever the rank count; so the position carries over as "samples of this epoch seen",
// s·G, and the new run continues at step floor(s·G / G') of the epoch. --on-resize says what
// stays fixed:
//   keep-global-batch    G' = G: the batch per rank becomes G / ranks (refused when it does not
//                        divide); the learning rate stays. The run continues as the old one
//                        would have, up to floating-point reassociation.
//   keep-per-rank-batch  the batch per rank is --batch-size, so G' = ranks · batch; the learning
//                        rate is multiplied by G' / G (the linear scaling rule).
// With the same rank count and batch, the run continues exactly, to the bit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "data/sharded_sampler.h"
#include "models/model.h"
#include "storage/checkpoint.h"
#include "training/config.h"
#include "training/optimizer.h"

namespace ringtrain::training {

// The schedule's base learning rate of a fresh run: --lr, times the ranks under --scale-lr.
double freshBaseLearningRate(const TrainConfig& config, int worldSize);

// What rank 0 saves: the model's parameters (one tensor per parameter-table entry), the
// optimiser's state, `step` steps done, the sampler's next position, the configuration
// (configLines) with two more lines a resized run needs, "# base-lr = ..." and "# lr = ...".
storage::CheckpointContent checkpointContent(const models::Model<float>& model,
                                             Optimizer& optimizer, const TrainConfig& config,
                                             std::int64_t step, data::SamplerPosition next,
                                             int worldSize, double baseLr);

// Copies a checkpoint's parameters and optimiser state into the model and the optimiser (of kind
// `optimizerKind`, --optimizer). Throws storage::CheckpointError naming `file` when they do not
// fit (another layout, another optimiser); part of the checkpoint may then be in the model already,
// so another must be restored (or the run refused) before training.
void restoreCheckpoint(const storage::CheckpointContent& saved, models::Model<float>& model,
                       Optimizer& optimizer, std::string_view optimizerKind,
                       const std::filesystem::path& file);

// Where and how a resumed run continues; rank 0 decides, every rank receives it.
struct ResumePoint {
  std::int64_t step = 0;          // optimiser steps done: training continues with this one
  data::SamplerPosition sampler;  // the next batch, in this run's layout
  std::int64_t optimizerSteps = 0;
  int batchSize = 0;               // per rank, in this run
  double baseLr = 0;               // the schedule's base learning rate in this run
  std::vector<std::string> notes;  // for the log: what changed against the saved run, and why
};

// The rules of the header comment. `datasetSize` is the training set's. Returns the refusal, one
// line, when they cannot be met.
std::variant<ResumePoint, std::string> planResume(const storage::CheckpointContent& saved,
                                                  const TrainConfig& config, int worldSize,
                                                  std::int64_t datasetSize);

}  // namespace ringtrain::training
