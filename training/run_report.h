// The lines `ringtrain train` prints on rank 0 when a run ends: the throughput, where the step
// time went, the checkpoints, and how the run stopped.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "training/config.h"
#include "training/training_summary.h"

namespace ringtrain::training {

// What the report says beside the summary.
struct RunFacts {
  bool classification = true;        // accuracy; otherwise the test loss
  std::int64_t tokensPerSample = 0;  // > 0: a language model (validation loss, tokens/s)
  // --model linreg: the learned slope and intercept.
  std::span<const float> parameters;
};

std::vector<std::string> runReport(const TrainingSummary& summary, const TrainConfig& config,
                                   const RunFacts& facts);

// Where a run stands, for rank 0's progress line.
struct Progress {
  std::int64_t step = 0;       // steps done
  std::int64_t steps = 0;      // steps planned
  std::int64_t firstStep = 0;  // a resumed run's first step
  std::int64_t epoch = 1;      // the epoch under way, from 1
  std::int64_t epochs = 1;
  double loss = 0;
  double learningRate = 0;
  double samplesPerSecond = 0;       // all ranks
  std::int64_t tokensPerSample = 0;  // > 0: a language model's rate is told in tokens
  int ranks = 1;
  double elapsedSeconds = 0;  // since this run started
};

// "step 300/945 (epoch 4/15)  loss 0.1234  lr 0.05000  38000 samples/s (19000/rank), 1:12
// elapsed, ~2:40 left": what is left is estimated from this run's pace so far.
std::string progressLine(const Progress& progress);
// "0:07", "2:40", "1:02:03".
std::string formatDuration(double seconds);

}  // namespace ringtrain::training
