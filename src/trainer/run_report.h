// The lines `ringtrain train` prints on rank 0 when a run ends: the throughput, where the step
// time went, the checkpoints, and how the run stopped.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "src/trainer/config.h"
#include "src/trainer/trainer.h"

namespace ringtrain {

// What the report says beside the summary.
struct RunFacts {
  bool classification = true;  // accuracy; otherwise the test loss
  // --model linreg: the learned slope and intercept.
  std::span<const float> parameters;
};

std::vector<std::string> runReport(const TrainingSummary& summary, const TrainConfig& config,
                                   const RunFacts& facts);

}  // namespace ringtrain
