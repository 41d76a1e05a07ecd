#include "models/softmax_cross_entropy.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "models/exponentials.h"
#include "models/stage_clock.h"

namespace ringtrain::models {
void checkClassLabels(std::span<const std::int32_t> labels, Index classes, Index batch) {
  if (static_cast<Index>(labels.size()) != batch)
    throw std::invalid_argument("softmax cross-entropy: " + std::to_string(labels.size()) +
                                " labels for a batch of " + std::to_string(batch));
  for (std::size_t b = 0; b < labels.size(); ++b) {
    if (labels[b] < 0 || labels[b] >= classes)
      throw std::invalid_argument("softmax cross-entropy: label " + std::to_string(labels[b]) +
                                  " of sample " + std::to_string(b) + " is outside [0, " +
                                  std::to_string(classes) + ")");
  }
}

template <class Scalar>
void SoftmaxCrossEntropy<Scalar>::reserve(Index outputs, Index /*batch*/) {
  exponentials_.reserve(outputs);
}

// Column by column: one sample's C values (200 KB for GPT-2's vocabulary) come from memory once
// and stay in cache from the exponential to the scaling (scaledSoftmax).
template <class Scalar>
LossTotals SoftmaxCrossEntropy<Scalar>::compute(ConstBatchView<Scalar> logits,
                                                const Targets<Scalar>& targets,
                                                BatchView<Scalar>* gradient) {
  const Index classes = logits.rows();
  const Index batch = logits.cols();
  // At least the logits read and the gradient written once each.
  const StageScope stage(Stage::kLoss,
                         bytesOf<Scalar>((gradient != nullptr ? 2 : 1) * classes * batch));
  checkClassLabels(targets.labels, classes, batch);
  Scalar* scratch = exponentials_.reserve(classes);
  const Scalar inverseBatch = Scalar(1) / static_cast<Scalar>(batch);

  LossTotals totals;
  for (Index b = 0; b < batch; ++b) {
    const auto z = logits.col(b);
    const Index label = targets.labels[static_cast<std::size_t>(b)];
    // Read before the softmax, which may overwrite the logits (Loss::compute).
    const Scalar labelLogit = z(label);
    const bool noEarlierTie = (z.head(label).array() < labelLogit).all();
    // The gradient is the softmax over 1/B, with 1/B taken off at the label.
    Scalar* softmax = gradient != nullptr ? gradient->col(b).data() : scratch;
    const auto [maximum, sum] = scaledSoftmax(z.data(), softmax, classes, inverseBatch);
    // (m − z) first: both are large when the logits are, their difference is not, and adding
    // log Σ to m first would round it away (1001 + 0.31 in float keeps only ~4 decimals).
    totals.loss += static_cast<double>(maximum - labelLogit) + static_cast<double>(std::log(sum));
    // Correct when the label holds the maximum and no earlier class ties it (the first maximum
    // wins, as in argmax), so all-equal logits count as class 0, not as every label.
    if (labelLogit == maximum && noEarlierTie) ++totals.correct;
    if (gradient != nullptr) softmax[label] -= inverseBatch;
  }
  return totals;
}

template class SoftmaxCrossEntropy<float>;
template class SoftmaxCrossEntropy<double>;

}  // namespace ringtrain::models
