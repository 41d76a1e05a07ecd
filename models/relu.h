// ReLU: y = max(x, 0), element-wise over the whole batch.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "models/layer.h"

namespace ringtrain::models {

template <class Scalar>
class Relu final : public Layer<Scalar> {
 public:
  Relu(std::string name, SampleShape shape) : Layer<Scalar>(std::move(name), shape, shape) {}

  std::string_view kind() const override { return "relu"; }
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  // Reads the output, not the input: y > 0 exactly where x > 0, and y is what the model keeps.
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;
};

extern template class Relu<float>;
extern template class Relu<double>;

}  // namespace ringtrain::models
