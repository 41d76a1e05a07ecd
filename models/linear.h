// Linear (dense) layer: y = W x + b over a whole batch, one matrix product each way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/layer.h"

namespace ringtrain::models {

// Parameters, in this order: weight {out, in} (row-major), bias {out}.
template <class Scalar>
class Linear final : public Layer<Scalar> {
 public:
  Linear(std::string name, Index inFeatures, Index outFeatures, Initialization init);

  std::string_view kind() const override { return "linear"; }
  std::vector<ParameterShape> parameterShapes() const override;
  void initialize(SplitMix64& generator) override;
  double forwardFlopsPerSample() const override;
  bool backwardReadsOutput() const override { return false; }

  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

  WeightView<Scalar> weight() { return {this->parameterData(), out_, in_}; }
  VectorView<Scalar> bias() { return {this->parameterData() + out_ * in_, out_}; }
  WeightView<Scalar> weightGradient() { return {this->gradientData(), out_, in_}; }
  VectorView<Scalar> biasGradient() { return {this->gradientData() + out_ * in_, out_}; }

 private:
  Index in_;
  Index out_;
  Initialization init_;
};

extern template class Linear<float>;
extern template class Linear<double>;

}  // namespace ringtrain::models
