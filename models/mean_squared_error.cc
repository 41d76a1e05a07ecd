#include "models/mean_squared_error.h"

#include <stdexcept>
#include <string>

namespace ringtrain::models {

template <class Scalar>
LossTotals MeanSquaredError<Scalar>::compute(ConstBatchView<Scalar> outputs,
                                             const Targets<Scalar>& targets,
                                             BatchView<Scalar>* gradient) {
  if (static_cast<Index>(targets.values.size()) != outputs.size())
    throw std::invalid_argument("mean squared error: " + std::to_string(targets.values.size()) +
                                " target values for " + std::to_string(outputs.cols()) +
                                " samples of " + std::to_string(outputs.rows()) + " outputs");
  const ConstBatchView<Scalar> expected(targets.values.data(), outputs.rows(), outputs.cols());
  LossTotals totals;
  totals.loss =
      static_cast<double>((outputs - expected).squaredNorm()) / static_cast<double>(outputs.rows());
  // Coefficient by coefficient, so `gradient` may be the outputs' memory.
  if (gradient != nullptr)
    *gradient = (outputs - expected) * (Scalar(2) / static_cast<Scalar>(outputs.size()));
  return totals;
}

template class MeanSquaredError<float>;
template class MeanSquaredError<double>;

}  // namespace ringtrain::models
