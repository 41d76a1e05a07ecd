#include "training/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ringtrain::training {

double learningRateAt(const LrScheduleOptions& o, std::int64_t step) {
  if (step < o.warmupSteps) {
    return o.baseLr * static_cast<double>(step + 1) / static_cast<double>(o.warmupSteps);
  }
  const std::int64_t after = step - o.warmupSteps;
  switch (o.kind) {
    case LrScheduleKind::kConstant:
      break;
    case LrScheduleKind::kStep:
      return o.baseLr * std::pow(o.gamma, static_cast<double>(after / o.stepSize));
    case LrScheduleKind::kCosine: {
      const std::int64_t span = std::max<std::int64_t>(1, o.totalSteps - o.warmupSteps);
      const double progress = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
      return o.baseLr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
  }
  return o.baseLr;
}

}  // namespace ringtrain::training
