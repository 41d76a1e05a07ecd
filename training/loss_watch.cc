#include "training/loss_watch.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace ringtrain::training {

std::string divergenceMessage(std::string_view what, double value, std::int64_t step, double lr) {
  // NaN's sign says nothing.
  const std::string shown = std::isnan(value) ? "nan" : fmt::format("{}", value);
  return fmt::format("{} is {} at step {}: training diverged; try a lower --lr (now {})", what,
                     shown, step, lr);
}

void stopIfDiverged(std::string_view what, double value, std::int64_t step, double lr) {
  if (!std::isfinite(value)) throw TrainingStopped(divergenceMessage(what, value, step, lr));
}

LossWatch::LossWatch(int classes, std::int64_t start, double lr)
    : chance_(classes > 1 ? std::log(static_cast<double>(classes)) : 0),
      classes_(classes),
      judgedAfter_(start + kChanceQuietSteps),
      lr_(lr) {}

std::optional<std::string> LossWatch::observe(std::int64_t first, std::int64_t last,
                                              double meanLoss) {
  if (warned_ || chance_ <= 0 || last <= judgedAfter_) return std::nullopt;
  if (!(std::fabs(meanLoss - chance_) <= kChanceTolerance * chance_)) {
    streakFirst_ = -1;
    return std::nullopt;
  }
  if (streakFirst_ < 0) streakFirst_ = first;
  if (last - streakFirst_ < kChanceSteps) return std::nullopt;
  warned_ = true;
  return fmt::format(
      "warning: the training loss has stayed at the chance level ln({}) = {:.4f} from step {} to "
      "{} (now {:.4f}): the model is not learning; try another --lr (now {}) or check the labels",
      classes_, chance_, streakFirst_ + 1, last, meanLoss, lr_);
}

}  // namespace ringtrain::training
