// Softmax cross-entropy on logits, with the softmax folded into the loss.
//
// Per sample, loss = log Σ_k exp(z_k) − z_label, computed as m + log Σ_k exp(z_k − m) with
// m = max_k z_k, so no exponential overflows (logits of 1000 are fine) and the largest term is
// exactly 1. The gradient of the mean loss is (softmax(z) − onehot(label)) / B, written directly:
// going through the softmax's Jacobian would cost a C×C product per sample and lose precision.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "models/loss.h"

namespace ringtrain::models {

// Throws std::invalid_argument unless there are `batch` labels, each in [0, classes).
void checkClassLabels(std::span<const std::int32_t> labels, Index classes, Index batch);

template <class Scalar>
class SoftmaxCrossEntropy final : public Loss<Scalar> {
 public:
  std::string_view kind() const override { return "softmax_cross_entropy"; }
  bool needsLabels() const override { return true; }
  void reserve(Index outputs, Index batch) override;
  void listWorkspaces(HeldMemoryList& held) const override { held.push_back(exponentials_.held()); }
  LossTotals compute(ConstBatchView<Scalar> logits, const Targets<Scalar>& targets,
                     BatchView<Scalar>* gradient) override;

 private:
  Workspace<Scalar> exponentials_;  // one sample's softmax, when no gradient buffer holds it
};

extern template class SoftmaxCrossEntropy<float>;
extern template class SoftmaxCrossEntropy<double>;

}  // namespace ringtrain::models
