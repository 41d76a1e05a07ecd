// Forward values of each layer against results worked out by hand for small cases, and the
// convolution against a direct (seven nested loops) convolution for the layouts, strides and
// paddings that im2col has to get right.
#include <gtest/gtest.h>

#include <vector>

#include "models/conv2d.h"
#include "models/flatten.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/relu.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

// Runs layer.forward on `input` (B samples) and returns the output.
std::vector<double> forward(Layer<double>& layer, std::vector<double> input, Index batch) {
  layer.reserve(batch);
  std::vector<double> output(static_cast<std::size_t>(layer.outputShape().size() * batch));
  layer.forward(ConstBatchView<double>(input.data(), layer.inputShape().size(), batch),
                BatchView<double>(output.data(), layer.outputShape().size(), batch));
  return output;
}

TEST(LayerForwardTest, LinearComputesWeightTimesInputPlusBias) {
  Linear<double> layer("fc", 2, 3, Initialization::kHe);
  // weight {3, 2} row-major, then bias {3}.
  std::vector<double> parameters{1, 2, 3, 4, 5, 6, 0.5, -1, 0};
  std::vector<double> gradients(parameters.size());
  layer.bind(parameters.data(), gradients.data());
  // Two samples: (1, -1) and (0, 2).
  const auto y = forward(layer, {1, -1, 0, 2}, 2);
  EXPECT_EQ(y, (std::vector<double>{-0.5, -2, -1, 4.5, 7, 12}));
}

TEST(LayerForwardTest, ReluZeroesNegativesAndKeepsPositives) {
  Relu<double> layer("relu", {4, 1, 1});
  EXPECT_EQ(forward(layer, {-1, 0, 2.5, -0.0}, 1), (std::vector<double>{0, 0, 2.5, 0}));
}

TEST(LayerForwardTest, ConvolutionOfA3x3ImageWithA2x2Kernel) {
  // Image 1 2 3 / 4 5 6 / 7 8 9, kernel 1 2 / 3 4, bias 1, no padding: a 2x2 output.
  std::vector<double> parameters{1, 2, 3, 4, 1}, gradients;
  Conv2d<double> layer("conv", {1, 3, 3}, {.outChannels = 1, .kernel = 2});
  gradients.resize(parameters.size());
  layer.bind(parameters.data(), gradients.data());
  const auto y = forward(layer, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 1);
  // 1·1+2·2+4·3+5·4+1 = 38, then 48, 68, 78.
  EXPECT_EQ(y, (std::vector<double>{38, 48, 68, 78}));
}

TEST(LayerForwardTest, ConvolutionWithPaddingSumsEachNeighbourhood) {
  // A 3x3 kernel of ones with padding 1 sums each pixel's 3x3 neighbourhood, zeros outside.
  std::vector<double> parameters(10, 1.0), gradients;
  parameters[9] = 0;  // bias
  Conv2d<double> layer("conv", {1, 3, 3}, {.outChannels = 1, .kernel = 3, .padding = 1});
  gradients.resize(parameters.size());
  layer.bind(parameters.data(), gradients.data());
  const auto y = forward(layer, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 1);
  EXPECT_EQ(y, (std::vector<double>{12, 21, 16, 27, 45, 33, 24, 39, 28}));
}

TEST(LayerForwardTest, ConvolutionOutputIsChannelsLast) {
  // Two output channels, 1x1 kernel: channel 0 doubles, channel 1 negates; the two values of
  // each pixel come side by side.
  std::vector<double> parameters{2, -1, 0, 0.5}, gradients;
  Conv2d<double> layer("conv", {1, 1, 3}, {.outChannels = 2, .kernel = 1});
  gradients.resize(parameters.size());
  layer.bind(parameters.data(), gradients.data());
  EXPECT_EQ(forward(layer, {1, 2, 3}, 1), (std::vector<double>{2, -0.5, 4, -1.5, 6, -2.5}));
}

// out[b][ho][wo][o] = bias[o] + Σ_{i,j,c} w[o][i][j][c] · in[b][c or h,w...], straight from the
// definition, reading the input in either layout.
std::vector<double> directConvolution(const std::vector<double>& input, Index batch, SampleShape in,
                                      const Conv2dOptions& o,
                                      const std::vector<double>& parameters) {
  const Index outH = (in.height + 2 * o.padding - o.kernel) / o.stride + 1;
  const Index outW = (in.width + 2 * o.padding - o.kernel) / o.stride + 1;
  const Index k = o.kernel;
  const Index c = in.channels;
  std::vector<double> out(static_cast<std::size_t>(batch * outH * outW * o.outChannels));
  for (Index b = 0; b < batch; ++b)
    for (Index ho = 0; ho < outH; ++ho)
      for (Index wo = 0; wo < outW; ++wo)
        for (Index oc = 0; oc < o.outChannels; ++oc) {
          double sum = parameters[static_cast<std::size_t>(o.outChannels * k * k * c + oc)];
          for (Index i = 0; i < k; ++i)
            for (Index j = 0; j < k; ++j)
              for (Index ic = 0; ic < c; ++ic) {
                const Index h = ho * o.stride - o.padding + i;
                const Index w = wo * o.stride - o.padding + j;
                if (h < 0 || h >= in.height || w < 0 || w >= in.width) continue;
                const Index at = o.inputLayout == ImageLayout::kChannelsFirst
                                     ? (ic * in.height + h) * in.width + w
                                     : (h * in.width + w) * c + ic;
                sum += parameters[static_cast<std::size_t>(((oc * k + i) * k + j) * c + ic)] *
                       input[static_cast<std::size_t>(b * in.size() + at)];
              }
          out[static_cast<std::size_t>(((b * outH + ho) * outW + wo) * o.outChannels + oc)] = sum;
        }
  return out;
}

TEST(LayerForwardTest, ConvolutionMatchesADirectConvolutionForLayoutsStridesAndPadding) {
  const std::vector<std::pair<SampleShape, Conv2dOptions>> cases{
      {{3, 6, 5}, {4, 3, 1, 1, ImageLayout::kChannelsFirst}},
      {{3, 6, 5}, {4, 3, 1, 1, ImageLayout::kChannelsLast}},
      {{2, 7, 8}, {3, 3, 2, 0, ImageLayout::kChannelsLast}},
      {{2, 7, 8}, {3, 5, 2, 2, ImageLayout::kChannelsFirst}},
      {{1, 9, 9}, {5, 5, 1, 2, ImageLayout::kChannelsFirst}},
      // One sample per chunk of the batch (chunkBytes 1), in both column orders.
      {{3, 6, 5}, {4, 3, 1, 1, ImageLayout::kChannelsFirst, Initialization::kHe, 1}},
      {{2, 7, 8}, {3, 3, 2, 1, ImageLayout::kChannelsLast, Initialization::kHe, 1}},
  };
  for (const auto& [shape, options] : cases) {
    std::vector<double> gradients;
    Conv2d<double> layer("conv", shape, options);
    std::vector<double> parameters =
        test_support::uniformValues(static_cast<std::size_t>(layer.parameterCount()), -1, 1, 3);
    gradients.resize(parameters.size());
    layer.bind(parameters.data(), gradients.data());
    const Index batch = 3;
    const auto input =
        test_support::uniformValues(static_cast<std::size_t>(shape.size() * batch), -1, 1, 4);
    const auto expected = directConvolution(input, batch, shape, options, parameters);
    const auto actual = forward(layer, input, batch);
    ASSERT_EQ(actual.size(), expected.size());
    for (std::size_t i = 0; i < actual.size(); ++i)
      ASSERT_NEAR(actual[i], expected[i], 1e-12) << toString(shape) << " element " << i;
  }
}

TEST(LayerForwardTest, MaxPoolTakesTheLargestOfEachWindowPerChannel) {
  MaxPool2d<double> layer("pool", {1, 4, 4}, 2);
  const auto y = forward(layer,
                         {1, 5, 2, 0,    //
                          3, 4, 8, 7,    //
                          -1, -2, 6, 6,  //
                          -3, -4, 6, 9},
                         1);
  EXPECT_EQ(y, (std::vector<double>{5, 8, -1, 9}));
}

TEST(LayerForwardTest, MaxPoolKeepsChannelsApart) {
  // 2 channels, channels-last 2x2 image: (1,10) (4,-10) / (3,0) (2,5).
  MaxPool2d<double> layer("pool", {2, 2, 2}, 2);
  EXPECT_EQ(forward(layer, {1, 10, 4, -10, 3, 0, 2, 5}, 1), (std::vector<double>{4, 10}));
}

TEST(LayerForwardTest, MaxPoolDropsWindowsThatRunPastTheEdge) {
  MaxPool2d<double> layer("pool", {1, 3, 3}, 2);
  EXPECT_EQ(layer.outputShape(), (SampleShape{1, 1, 1}));
  EXPECT_EQ(forward(layer, {1, 2, 100, 3, 4, 100, 100, 100, 100}, 1), (std::vector<double>{4}));
}

TEST(LayerForwardTest, FlattenKeepsTheValuesInStorageOrder) {
  Flatten<double> layer("flatten", {2, 1, 2});
  EXPECT_TRUE(layer.outputIsInput());
  EXPECT_EQ(layer.outputShape(), (SampleShape{4, 1, 1}));
  EXPECT_EQ(forward(layer, {1, 2, 3, 4}, 1), (std::vector<double>{1, 2, 3, 4}));
}

TEST(LayerForwardTest, LayersRejectShapesThatDoNotFit) {
  EXPECT_THROW(Conv2d<double>("conv", {1, 3, 3}, {.outChannels = 1, .kernel = 5}),
               std::invalid_argument);
  EXPECT_THROW(Conv2d<double>("conv", {1, 3, 3}, {.outChannels = 0, .kernel = 1}),
               std::invalid_argument);
  EXPECT_THROW(Conv2d<double>("conv", {1, 3, 3}, {.outChannels = 1, .kernel = 1, .chunkBytes = 0}),
               std::invalid_argument);
  EXPECT_THROW(MaxPool2d<double>("pool", {1, 1, 4}, 2), std::invalid_argument);
  EXPECT_THROW(Linear<double>("fc", 0, 3, Initialization::kHe), std::invalid_argument);
}

}  // namespace
}  // namespace ringtrain::models
