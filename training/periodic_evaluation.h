// PeriodicEvaluation: the test-set evaluations during training -- when they fall due (each
// epoch's end, every --eval-every steps, the last step) and their figures (evaluation.h's
// evaluateTestSet, the same code as `ringtrain eval`), over --eval-samples or the whole set.
#pragma once

#include <cstdint>

#include "collectives/communicator.h"
#include "engine/timeline.h"
#include "models/model.h"
#include "training/batch_source.h"
#include "training/evaluation.h"

namespace ringtrain::training {

class PeriodicEvaluation {
 public:
  // `evaluate` runs one chunk on the model that trains; `timeline` may be null.
  PeriodicEvaluation(const BatchSource& test, collectives::Communicator& control,
                     BatchEvaluator evaluate, std::int64_t evalSamples, std::int64_t evalEvery,
                     engine::Timeline* timeline);

  // Whether an evaluation falls due after step `done` (`epochEnded`: an epoch ended in it).
  bool dueAfter(std::int64_t done, bool epochEnded, std::int64_t plannedSteps) const;
  // Collective: the test set's loss and accuracy, summed over the ranks. `whole`: every sample,
  // else --eval-samples of them spread over the set.
  models::BatchResult evaluate(bool whole, int batchSize) const;

 private:
  const BatchSource& test_;
  collectives::Communicator& control_;
  BatchEvaluator evaluate_;
  std::int64_t evalSamples_;  // 0: all
  std::int64_t evalEvery_;    // 0: at epoch ends and the end only
  engine::Timeline* timeline_;
};

}  // namespace ringtrain::training
