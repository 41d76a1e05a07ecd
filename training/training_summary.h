// What a training run did, for its last lines and the run report (run_report.h): the Trainer
// fills it; the reporter and the report read it, without the Trainer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"
#include "training/memory_report.h"

namespace ringtrain::training {

struct TrainingSummary {
  std::int64_t steps = 0;      // optimiser steps trained by this run
  std::int64_t samples = 0;    // samples trained by this run, all ranks
  std::int64_t firstStep = 0;  // > 0: resumed there
  std::int64_t lastStep = 0;   // the steps done when the run ended
  bool stoppedBySigterm = false;
  int checkpoints = 0;  // written by rank 0
  double checkpointSeconds = 0;
  std::string lastCheckpoint;
  std::uint64_t parameterFingerprint = 0;  // of the final parameters, for comparing runs
  double stopCheckSeconds = 0;             // the per-step SIGTERM checks, on rank 0
  std::int64_t skippedSteps = 0;           // --check-finite skip
  double trainingSeconds = 0;  // the steps alone, evaluation excluded (the slowest rank's)
  double wallSeconds = 0;
  double samplesPerSecond = 0;  // all ranks together, over the training time
  double samplesPerSecondPerRank = 0;
  double lastTrainingLoss = 0;  // mean over the last logging window, all ranks
  models::BatchResult lastEvaluation;
  bool replicasIdentical = true;  // parameter fingerprints equal on every rank at the end
  // Where rank 0's step time went, in seconds.
  double dataSeconds = 0;     // gathering batches
  double computeSeconds = 0;  // forward and backward (with overlap, averaging runs meanwhile)
  double waitSeconds = 0;     // waiting for averaged gradients: the communication not hidden
  double optimizerSeconds = 0;
  double reduceSeconds = 0;           // all the gradient all-reduces took, hidden or not
  std::vector<MemoryAccount> memory;  // every rank's, at the end (memory_report.h)
};

}  // namespace ringtrain::training
