// Max-pooling over kernel×kernel windows of a channels-last batch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/layer.h"

namespace ringtrain::models {

// Input and output are channels-last (what Conv2d produces). Windows that would run past the
// bottom or right edge are dropped, as in PyTorch's default (floor) mode. Forward records which
// input won each output value; backward sends each output's gradient to that input alone.
template <class Scalar>
class MaxPool2d final : public Layer<Scalar> {
 public:
  // stride 0 means stride = kernel (non-overlapping windows). Throws std::invalid_argument when
  // the window does not fit the input.
  MaxPool2d(std::string name, SampleShape input, Index kernel, Index stride = 0);

  std::string_view kind() const override { return "max_pool2d"; }
  Index kernel() const { return kernel_; }
  Index stride() const { return stride_; }
  void reserve(Index batch) override;
  void listWorkspaces(HeldMemoryList& held) const override {
    held.push_back({winners_.data(), winners_.capacity() * sizeof(std::int32_t)});
  }
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

 private:
  Index kernel_;
  Index stride_;
  // Where each window position's values lie relative to the window's first value.
  std::vector<std::int32_t> window_;
  // For every output value of the last forward, the index of the winning input value within its
  // sample. 32 bits: a sample has far fewer than 2^31 values.
  std::vector<std::int32_t> winners_;
};

extern template class MaxPool2d<float>;
extern template class MaxPool2d<double>;

}  // namespace ringtrain::models
