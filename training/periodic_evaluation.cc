#include "training/periodic_evaluation.h"

#include <algorithm>
#include <utility>

#include "base/steady_clock.h"

namespace ringtrain::training {

PeriodicEvaluation::PeriodicEvaluation(const BatchSource& test, collectives::Communicator& control,
                                       BatchEvaluator evaluate, std::int64_t evalSamples,
                                       std::int64_t evalEvery, engine::Timeline* timeline)
    : test_(test),
      control_(control),
      evaluate_(std::move(evaluate)),
      evalSamples_(evalSamples),
      evalEvery_(evalEvery),
      timeline_(timeline) {}

bool PeriodicEvaluation::dueAfter(std::int64_t done, bool epochEnded,
                                  std::int64_t plannedSteps) const {
  const bool periodic = evalEvery_ > 0 && done % evalEvery_ == 0;
  return epochEnded || periodic || done == plannedSteps;
}

models::BatchResult PeriodicEvaluation::evaluate(bool whole, int batchSize) const {
  const std::int64_t start = steadyNowNs();
  // --eval-samples N: N samples spread evenly over the test set (sample j·size/N), so that a
  // test set in file order (the fortunes, file by file) is not judged by its first file.
  const std::int64_t size = test_.size();
  const std::int64_t samples = evalSamples_ > 0 && !whole ? std::min(evalSamples_, size) : size;
  const models::BatchResult global =
      evaluateTestSet(test_, samples, batchSize, control_, evaluate_);
  if (timeline_) timeline_->span("evaluation", "evaluation", start, steadyNowNs());
  return global;
}

}  // namespace ringtrain::training
