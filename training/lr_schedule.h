// Learning-rate schedules: constant, step and cosine, after an optional linear warm-up.
#pragma once

#include <cstdint>

#include "base/named_values.h"

namespace ringtrain::training {

enum class LrScheduleKind { kConstant, kStep, kCosine };
inline constexpr NamedValue<LrScheduleKind> kLrScheduleNames[] = {
    {LrScheduleKind::kConstant, "constant"},
    {LrScheduleKind::kStep, "step"},
    {LrScheduleKind::kCosine, "cosine"}};

struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double baseLr = 0.05;          // already multiplied by the ranks under --scale-lr
  std::int64_t warmupSteps = 0;  // lr rises linearly from baseLr/warmupSteps to baseLr
  std::int64_t stepSize = 1000;  // step: multiply by gamma every stepSize steps after warm-up
  double gamma = 0.1;
  std::int64_t totalSteps = 1;  // cosine: decays to 0 at the last step
};

// The learning rate for step `step` (0-based). The linear scaling rule for large batches (Goyal
// et al.: lr x ranks, with warm-up) is the caller's: it scales baseLr.
double learningRateAt(const LrScheduleOptions& options, std::int64_t step);

}  // namespace ringtrain::training
