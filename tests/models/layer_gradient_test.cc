// Every layer's backward against central finite differences in float64 (tolerances in
// gradient_check.h): parameter gradients and input gradients, on small random shapes that cover
// padding, strides, both input layouts, odd sizes and windows that are dropped at the edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>

#include "models/conv2d.h"
#include "models/flatten.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/relu.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

using test_support::kGradientTolerance;
using test_support::LayerHarness;

TEST(LayerGradientTest, LinearMatchesFiniteDifferences) {
  Linear<double> layer("fc", 5, 3, Initialization::kHe);
  LayerHarness harness(layer, 4, 11);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(LayerGradientTest, LinearWithOneSampleAndOneOutputMatchesFiniteDifferences) {
  Linear<double> layer("fc", 1, 1, Initialization::kXavier);
  LayerHarness harness(layer, 1, 12);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

struct ConvCase {
  const char* what;
  SampleShape input;
  Conv2dOptions options;
  Index batch;
};

void PrintTo(const ConvCase& c, std::ostream* out) {
  *out << c.what;
}

class ConvGradientTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradientTest, MatchesFiniteDifferences) {
  const ConvCase& c = GetParam();
  Conv2d<double> layer("conv", c.input, c.options);
  LayerHarness harness(layer, c.batch, 21);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << c.what << ": " << error.describe();
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvGradientTest,
                         ::testing::Values(ConvCase{"channels-last, same padding",
                                                    {3, 5, 6},
                                                    {4, 3, 1, 1, ImageLayout::kChannelsLast},
                                                    2},
                                           ConvCase{"channels-first, stride 2, no padding",
                                                    {2, 7, 7},
                                                    {3, 3, 2, 0, ImageLayout::kChannelsFirst},
                                                    3},
                                           ConvCase{"one channel, 5x5 kernel, padding 2 (conv1)",
                                                    {1, 6, 5},
                                                    {2, 5, 1, 2, ImageLayout::kChannelsFirst},
                                                    2},
                                           ConvCase{"padding wider than the image needs",
                                                    {2, 3, 4},
                                                    {2, 2, 1, 2, ImageLayout::kChannelsLast},
                                                    2},
                                           ConvCase{"stride leaves the last row and column out",
                                                    {2, 6, 6},
                                                    {2, 3, 2, 0, ImageLayout::kChannelsLast},
                                                    2},
                                           ConvCase{"channels-first, one sample per chunk",
                                                    {2, 6, 5},
                                                    {3, 3, 1, 1, ImageLayout::kChannelsFirst,
                                                     Initialization::kHe, /*chunkBytes=*/1},
                                                    3},
                                           ConvCase{"channels-last, stride 2, one sample per chunk",
                                                    {3, 7, 6},
                                                    {2, 3, 2, 1, ImageLayout::kChannelsLast,
                                                     Initialization::kHe, /*chunkBytes=*/1},
                                                    3}),
                         [](const ::testing::TestParamInfo<ConvCase>& p) {
                           return "case" + std::to_string(p.index);
                         });

TEST(LayerGradientTest, ReluMatchesFiniteDifferencesAwayFromTheKink) {
  Relu<double> layer("relu", {3, 2, 2});
  LayerHarness harness(layer, 3, 31);
  // The kink at 0 has no derivative: keep every input at least 0.1 from it, far beyond h.
  for (double& v : harness.input())
    v = std::copysign(0.1 + std::abs(v), v);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

// Distinct values 0.01 apart, shuffled: no window has a tie, even after a ±h perturbation.
void makeTieFree(std::vector<double>& values, std::uint64_t seed) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  SplitMix64 generator(seed);
  for (std::size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[generator.next() % i]);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = 0.01 * static_cast<double>(order[i]) - 1.0;
}

TEST(LayerGradientTest, MaxPoolMatchesFiniteDifferencesWithEdgeWindowsDropped) {
  MaxPool2d<double> layer("pool", {3, 5, 7}, 2);  // the last row and column belong to no window
  LayerHarness harness(layer, 2, 41);
  makeTieFree(harness.input(), 42);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(LayerGradientTest, OverlappingMaxPoolMatchesFiniteDifferences) {
  MaxPool2d<double> layer("pool", {2, 7, 7}, 3, 2);  // one input can win two windows
  LayerHarness harness(layer, 2, 43);
  makeTieFree(harness.input(), 44);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(LayerGradientTest, FlattenPassesGradientsThrough) {
  Flatten<double> layer("flatten", {2, 3, 2});
  LayerHarness harness(layer, 2, 51);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

}  // namespace
}  // namespace ringtrain::models
