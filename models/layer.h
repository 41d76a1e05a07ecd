// Layer: one step of a sequential model, forward and backward over a whole batch.
//
// A layer owns no parameters: the model hands it a slice of its flat parameter buffer and the
// same slice of its flat gradient buffer (bind), which the layer reads and writes through views.
// Backward is split in two so that the model can announce a layer's gradients before it spends
// a matrix product on the gradient for the layer below:
//   backwardParameters(x, dy)         writes the parameter gradients (overwrites, never adds);
//   backwardInput(x, y, dy, dx)       writes the gradient with respect to the input.
// Both use what forward left in the layer's workspaces, so they follow a forward on the same
// batch, in that order, once: a convolution reuses its im2col buffer for the input gradient.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/initialization.h"
#include "models/tensor.h"

namespace ringtrain::models {

// One parameter tensor of a layer: "weight" {out, in}, "bias" {out}. Shapes read in C order.
struct ParameterShape {
  std::string name;
  std::vector<Index> shape;

  Index count() const {
    Index total = 1;
    for (const Index extent : shape)
      total *= extent;
    return total;
  }
};

template <class Scalar>
class Layer {
 public:
  Layer(std::string name, SampleShape input, SampleShape output)
      : name_(std::move(name)), input_(input), output_(output) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // "fc1", "conv2", "relu3": unique within a model; parameter names are "<name>.<parameter>".
  const std::string& name() const { return name_; }
  // "linear", "conv2d", "relu", "max_pool2d", "flatten".
  virtual std::string_view kind() const = 0;
  SampleShape inputShape() const { return input_; }
  SampleShape outputShape() const { return output_; }

  // The parameter tensors in the order they lie in the layer's slice (empty: no parameters).
  virtual std::vector<ParameterShape> parameterShapes() const { return {}; }
  Index parameterCount() const {
    Index total = 0;
    for (const ParameterShape& p : parameterShapes())
      total += p.count();
    return total;
  }
  // A layer that reads a parameter tensor of an earlier layer instead of owning one (a GPT's
  // output head reads the token embedding): that tensor's name ("wte.weight") and the shape the
  // layer needs. Such a layer has no parameters of its own: the model binds it to the tensor and
  // to a gradient of its own, which it adds to the owner's before announcing the owner's layer.
  virtual std::optional<ParameterShape> tiedParameter() const { return std::nullopt; }
  // Points the layer at its slices (parameterCount() elements each, or the tied tensor's) of the
  // model's buffers.
  void bind(Scalar* parameters, Scalar* gradients) {
    parameters_ = parameters;
    gradients_ = gradients;
  }
  // Draws the weights from `generator`; biases become zero.
  virtual void initialize(SplitMix64& /*generator*/) {}

  // Sizes the layer's workspaces for batches of up to `batch` samples.
  virtual void reserve(Index /*batch*/) {}
  // Adds the workspaces the layer holds (HeldMemory) to `held`: the memory report's activations.
  virtual void listWorkspaces(HeldMemoryList& /*held*/) const {}
  // True when the output is the input reinterpreted (flatten): the model then gives the layer's
  // output and input gradient the memory of its input and input gradient, and skips the layer.
  virtual bool outputIsInput() const { return false; }
  // False when backward reads neither y nor the memory it lay in: as the last layer, the model
  // then has the loss write its gradient over y (no second outputs-sized buffer, as in llm.c).
  virtual bool backwardReadsOutput() const { return true; }
  // Multiply-adds ×2 of forward's matrix products for one sample (for GFLOP/s figures).
  virtual double forwardFlopsPerSample() const { return 0; }

  // x: inputShape().size() × B, y: outputShape().size() × B.
  virtual void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) = 0;
  virtual void backwardParameters(ConstBatchView<Scalar> /*x*/, ConstBatchView<Scalar> /*dy*/) {}
  virtual void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y,
                             ConstBatchView<Scalar> dy, BatchView<Scalar> dx) = 0;

 protected:
  // Weights uniform in ±bound for the first `weights` parameters, zeros (the biases) after them.
  void initializeWeightsAndZeroBiases(Index weights, double bound, SplitMix64& generator) {
    const auto all = static_cast<std::size_t>(parameterCount());
    const std::span<Scalar> values(parameters_, all);
    fillUniform(values.first(static_cast<std::size_t>(weights)), bound, generator);
    std::fill(values.begin() + weights, values.end(), Scalar(0));
  }
  Scalar* parameterData() const { return parameters_; }
  Scalar* gradientData() const { return gradients_; }

 private:
  std::string name_;
  SampleShape input_;
  SampleShape output_;
  Scalar* parameters_ = nullptr;
  Scalar* gradients_ = nullptr;
};

}  // namespace ringtrain::models
