// Loss: turns a batch of model outputs and targets into a loss, and the gradient that starts
// backward.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "models/tensor.h"

namespace ringtrain::models {

// What a batch is compared against: class labels for classification, values for regression.
template <class Scalar>
struct Targets {
  std::span<const std::int32_t> labels;  // one per sample, in [0, classes)
  std::span<const Scalar> values;        // outputs per sample, sample after sample
};

// Sums over the samples of a batch, so that batches and ranks can be added up before dividing.
struct LossTotals {
  double loss = 0;           // sum of the per-sample losses
  std::int64_t correct = 0;  // samples whose highest output is their label (classification)
};

template <class Scalar>
class Loss {
 public:
  virtual ~Loss() = default;

  // "softmax_cross_entropy", "mean_squared_error".
  virtual std::string_view kind() const = 0;
  virtual bool needsLabels() const = 0;
  // Sizes the workspaces for up to `batch` columns of `outputs` values (compute's shape).
  virtual void reserve(Index outputs, Index batch) = 0;
  // Adds the workspaces the loss holds to `held` (see Layer::listWorkspaces).
  virtual void listWorkspaces(HeldMemoryList& /*held*/) const {}
  // Compares outputs (outputs × B) with the targets. With `gradient` (same shape) it also writes
  // the gradient of the batch's mean loss with respect to the outputs; `gradient` may be the
  // outputs' own memory, which it then overwrites. Throws std::invalid_argument for targets of
  // the wrong count or labels out of range.
  virtual LossTotals compute(ConstBatchView<Scalar> outputs, const Targets<Scalar>& targets,
                             BatchView<Scalar>* gradient) = 0;
};

}  // namespace ringtrain::models
