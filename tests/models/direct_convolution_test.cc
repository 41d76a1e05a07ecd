// oneDNN's direct convolution (models/direct_convolution.h) against im2col and products, float32,
// the same layer twice: forward, the parameters' and the input's gradients for the layouts,
// strides and paddings Conv2d takes, the CNN's two layers among them, and a batch that changes.
// A build without oneDNN (RINGTRAIN_ONEDNN) skips, saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/conv2d.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

std::vector<float> floats(std::size_t n, std::uint64_t seed) {
  const auto values = test_support::uniformValues(n, -1, 1, seed);
  return {values.begin(), values.end()};
}

// A Conv2d<float> with its own parameters and gradients, run on one batch.
struct LayerRun {
  Conv2d<float> layer;
  std::vector<float> parameters, gradients, output, inputGradient;

  LayerRun(SampleShape shape, Conv2dOptions options, bool direct)
      : layer("conv", shape, [&] {
          options.direct = direct;
          return options;
        }()) {
    parameters = floats(static_cast<std::size_t>(layer.parameterCount()), 7);
    gradients.assign(parameters.size(), 0);
    layer.bind(parameters.data(), gradients.data());
  }

  void step(const std::vector<float>& input, const std::vector<float>& outputGradient,
            Index batch) {
    const Index in = layer.inputShape().size(), out = layer.outputShape().size();
    layer.reserve(batch);
    output.assign(static_cast<std::size_t>(out * batch), 0);
    inputGradient.assign(static_cast<std::size_t>(in * batch), 0);
    const ConstBatchView<float> x(input.data(), in, batch);
    layer.forward(x, BatchView<float>(output.data(), out, batch));
    const ConstBatchView<float> y(output.data(), out, batch);
    const ConstBatchView<float> dy(outputGradient.data(), out, batch);
    layer.backwardParameters(x, dy);
    layer.backwardInput(x, y, dy, BatchView<float>(inputGradient.data(), in, batch));
  }
};

// Agreement within float32 reassociation: sums of up to a few hundred products of values in
// [-1, 1] (the CNN's conv2 gradient sums over the batch's pixels).
void expectClose(const std::vector<float>& actual, const std::vector<float>& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], 1e-4f * (1 + std::abs(expected[i])))
        << what << " [" << i << "]";
}

TEST(DirectConvolutionTest, MatchesIm2colForwardAndBackward) {
  if (!Conv2d<float>("probe", {1, 3, 3}, {.outChannels = 1, .kernel = 1}).isDirect())
    GTEST_SKIP() << "built without oneDNN (RINGTRAIN_ONEDNN): no direct convolution to compare";
  const std::vector<std::pair<SampleShape, Conv2dOptions>> cases{
      // The CNN's conv1 and conv2 (models/model_factory.cc).
      {{1, 28, 28}, {16, 5, 1, 2, ImageLayout::kChannelsFirst}},
      {{16, 14, 14}, {32, 5, 1, 2, ImageLayout::kChannelsLast}},
      {{3, 6, 5}, {4, 3, 1, 1, ImageLayout::kChannelsFirst}},
      {{3, 6, 5}, {4, 3, 1, 1, ImageLayout::kChannelsLast}},
      {{2, 7, 8}, {3, 3, 2, 0, ImageLayout::kChannelsLast}},
      {{2, 7, 8}, {3, 5, 2, 2, ImageLayout::kChannelsFirst}},
  };
  for (const auto& [shape, options] : cases) {
    LayerRun direct(shape, options, true), lowered(shape, options, false);
    ASSERT_TRUE(direct.layer.isDirect());
    ASSERT_FALSE(lowered.layer.isDirect());
    for (const Index batch : {Index{3}, Index{2}}) {  // the second remakes the primitives
      const auto input = floats(static_cast<std::size_t>(shape.size() * batch), 11 + batch);
      const auto gradient =
          floats(static_cast<std::size_t>(direct.layer.outputShape().size() * batch), 13 + batch);
      direct.step(input, gradient, batch);
      lowered.step(input, gradient, batch);
      const std::string what = toString(shape) + " batch " + std::to_string(batch);
      expectClose(direct.output, lowered.output, what + " output");
      expectClose(direct.gradients, lowered.gradients, what + " parameter gradients");
      expectClose(direct.inputGradient, lowered.inputGradient, what + " input gradient");
    }
  }
}

}  // namespace
}  // namespace ringtrain::models
