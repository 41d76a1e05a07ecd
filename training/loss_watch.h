// LossWatch: judges the logged training loss, so that a run that diverges or does not learn says
// so instead of ending quietly.
//
// Divergence: a loss that is NaN or infinite ends training (the trainer throws TrainingStopped
// with divergenceMessage's line, exit status 3). Chance level: a cross-entropy over K classes
// (a GPT's vocabulary) that predicts nothing sits at ln(K). Logged windows count once they end
// more than kChanceQuietSteps after the start (the run's first step, or the end of the
// learning-rate warm-up if later); when consecutive counting windows, each of mean loss within
// kChanceTolerance of ln(K), cover kChanceSteps steps or more, observe() returns a warning, once.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ringtrain::training {

inline constexpr double kChanceTolerance = 0.05;   // relative to ln(K)
inline constexpr std::int64_t kChanceSteps = 100;  // the span at chance level that is warned about
inline constexpr std::int64_t kChanceQuietSteps = 100;  // after the start, nothing is judged

// Thrown on every rank, with the same text, when training must stop: --check-finite stop, or a
// diverged run (a non-finite loss or parameters).
class TrainingStopped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "the training loss is nan at step 120: training diverged; try a lower --lr (now 0.1)".
// `what`: "the training loss", "the test loss", ...
std::string divergenceMessage(std::string_view what, double value, std::int64_t step, double lr);
// Throws TrainingStopped with divergenceMessage's line when `value` is NaN or infinite.
void stopIfDiverged(std::string_view what, double value, std::int64_t step, double lr);

class LossWatch {
 public:
  // `classes`: K of the cross-entropy (0: a regression, which has no chance level). `start`:
  // the run's first step or the end of its warm-up, whichever is later.
  LossWatch(int classes, std::int64_t start, double lr);

  // The mean training loss of the logged window of steps (first, last]. Returns the chance-level
  // warning the first time the rule above holds, else nothing.
  std::optional<std::string> observe(std::int64_t first, std::int64_t last, double meanLoss);

  double chanceLoss() const { return chance_; }

 private:
  double chance_ = 0;  // ln(K); 0: none
  int classes_ = 0;
  std::int64_t judgedAfter_ = 0;  // windows ending after this step count
  double lr_ = 0;
  std::int64_t streakFirst_ = -1;  // the first step of the current run of windows at chance
  bool warned_ = false;
};

}  // namespace ringtrain::training
