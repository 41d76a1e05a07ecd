// Mean squared error, averaged over outputs and samples as PyTorch's MSELoss does:
// loss = (1 / (B·O)) Σ (y − t)², gradient 2 (y − t) / (B·O).
#pragma once

#include <string_view>

#include "models/loss.h"

namespace ringtrain::models {

template <class Scalar>
class MeanSquaredError final : public Loss<Scalar> {
 public:
  std::string_view kind() const override { return "mean_squared_error"; }
  bool needsLabels() const override { return false; }
  void reserve(Index /*outputs*/, Index /*batch*/) override {}
  // LossTotals::loss is the sum over samples of each sample's mean over its outputs.
  LossTotals compute(ConstBatchView<Scalar> outputs, const Targets<Scalar>& targets,
                     BatchView<Scalar>* gradient) override;
};

extern template class MeanSquaredError<float>;
extern template class MeanSquaredError<double>;

}  // namespace ringtrain::models
