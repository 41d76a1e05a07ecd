#include "models/softmax_cross_entropy.h"

#include <cmath>
#include <stdexcept>
#include <string>

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
void SoftmaxCrossEntropy<Scalar>::reserve(Index outputs, Index batch) {
  exponentials_.reserve((outputs + 3) * batch);
}

template <class Scalar>
LossTotals SoftmaxCrossEntropy<Scalar>::compute(ConstBatchView<Scalar> logits,
                                                const Targets<Scalar>& targets,
                                                BatchView<Scalar>* gradient) {
  using Row = Eigen::Map<Eigen::Array<Scalar, 1, Eigen::Dynamic>>;
  const Index classes = logits.rows();
  const Index batch = logits.cols();
  checkClassLabels(targets.labels, classes, batch);

  // The exponentials go straight into the gradient buffer when there is one: the gradient is
  // those same values, scaled, with 1/B taken off at each label.
  Scalar* scratch = exponentials_.reserve((classes + 3) * batch);
  BatchView<Scalar> exps(gradient != nullptr ? gradient->data() : scratch + 3 * batch, classes,
                         batch);
  Row maxima(scratch, batch);
  Row sums(scratch + batch, batch);
  Row logSums(scratch + 2 * batch, batch);

  // Whole-batch expressions: each runs over all B·C values in vector registers.
  maxima = logits.colwise().maxCoeff().array();
  exps.array() = (logits.array().rowwise() - maxima).exp();
  sums = exps.colwise().sum().array();
  logSums = sums.log();

  LossTotals totals;
  for (Index b = 0; b < batch; ++b) {
    const Index label = targets.labels[static_cast<std::size_t>(b)];
    const Scalar z = logits(label, b);
    // (m − z) first: both are large when the logits are, their difference is not, and adding
    // log Σ to m first would round it away (1001 + 0.31 in float keeps only ~4 decimals).
    totals.loss += static_cast<double>(maxima(b) - z) + static_cast<double>(logSums(b));
    // Correct when the label holds the maximum and no earlier class ties it (the first maximum
    // wins, as in argmax), so all-equal logits count as class 0, not as every label.
    if (z == maxima(b) && (logits.col(b).head(label).array() < z).all()) ++totals.correct;
  }

  if (gradient != nullptr) {
    const Scalar inverseBatch = Scalar(1) / static_cast<Scalar>(batch);
    sums = inverseBatch / sums;
    exps.array().rowwise() *= sums;
    for (Index b = 0; b < batch; ++b)
      exps(targets.labels[static_cast<std::size_t>(b)], b) -= inverseBatch;
  }
  return totals;
}

template class SoftmaxCrossEntropy<float>;
template class SoftmaxCrossEntropy<double>;

}  // namespace ringtrain::models
