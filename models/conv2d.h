// 2-D convolution as im2col and one matrix product over the whole batch.
//
// im2col lays every receptive field of every sample out as one column of a K×N matrix
// (K = kernel·kernel·C values per field, N = B·outHeight·outWidth fields in the batch). Then
//   forward           Y  = W · cols + b         (O×K · K×N: one product for the whole batch)
//   weight gradient   dW = dY · colsᵀ
//   input gradient    dcols = Wᵀ · dY, scattered back onto the input image (col2im)
// Y comes out as O×N column-major: for each output pixel its O channels side by side, pixels in
// row order, samples one after another. That is the batch in channels-last (HWC) order, with no
// transpose; so the layer's output is channels-last, whatever its input's layout.
//
// The weight is {O, kernel, kernel, C} row-major ("OHWI", TensorFlow Lite's order), matching
// the (i, j, c) order of a column's rows: for a channels-last input one kernel row of a field,
// kernel·C values, is one contiguous copy.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/layer.h"

namespace ringtrain::models {

struct Conv2dOptions {
  Index outChannels = 1;
  Index kernel = 3;  // square kernels only
  Index stride = 1;
  Index padding = 0;  // zeros on every side
  ImageLayout inputLayout = ImageLayout::kChannelsLast;
  Initialization init = Initialization::kHe;
};

// Parameters, in this order: weight {O, kernel, kernel, C} (row-major), bias {O}.
template <class Scalar>
class Conv2d final : public Layer<Scalar> {
 public:
  // Throws std::invalid_argument when the kernel does not fit the padded input.
  Conv2d(std::string name, SampleShape input, const Conv2dOptions& options);

  std::string_view kind() const override { return "conv2d"; }
  std::vector<ParameterShape> parameterShapes() const override;
  void initialize(SplitMix64& generator) override;
  void reserve(Index batch) override;
  double forwardFlopsPerSample() const override;

  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  // Overwrites the im2col buffer that forward filled: call it after backwardParameters.
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

  const Conv2dOptions& options() const { return options_; }

  // O × K, K = kernel·kernel·C in (i, j, c) order.
  WeightView<Scalar> weight() { return {this->parameterData(), options_.outChannels, fieldSize()}; }
  VectorView<Scalar> bias() {
    return {this->parameterData() + options_.outChannels * fieldSize(), options_.outChannels};
  }
  WeightView<Scalar> weightGradient() {
    return {this->gradientData(), options_.outChannels, fieldSize()};
  }
  VectorView<Scalar> biasGradient() {
    return {this->gradientData() + options_.outChannels * fieldSize(), options_.outChannels};
  }

 private:
  Index fieldSize() const;
  Index outputPixels() const;
  void im2col(const Scalar* x, Index batch, Scalar* cols) const;
  void col2im(const Scalar* cols, Index batch, Scalar* dx) const;

  Conv2dOptions options_;
  // K × (B·outHeight·outWidth): the fields of the last forward, then their gradients.
  Workspace<Scalar> columns_;
};

extern template class Conv2d<float>;
extern template class Conv2d<double>;

}  // namespace ringtrain::models
