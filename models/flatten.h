// Flatten: a C×H×W sample becomes a vector of C·H·W features, in the order it is stored.
//
// Batches are already features × samples, so this is a change of shape only: inside a model the
// output is the input's memory (outputIsInput) and nothing runs. After a convolution stack the
// features are in channels-last order, (h, w, c) with c fastest; the dense layer that follows
// learns whatever order it is given.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "models/layer.h"

namespace ringtrain::models {

template <class Scalar>
class Flatten final : public Layer<Scalar> {
 public:
  Flatten(std::string name, SampleShape input)
      : Layer<Scalar>(std::move(name), input, {input.size(), 1, 1}) {}

  std::string_view kind() const override { return "flatten"; }
  bool outputIsInput() const override { return true; }
  // Used only outside a model (where output and input are separate buffers): copies.
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;
};

extern template class Flatten<float>;
extern template class Flatten<double>;

}  // namespace ringtrain::models
