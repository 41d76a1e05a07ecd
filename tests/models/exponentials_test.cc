// The vector exponential: within 1 ulp of std::exp over its normal range, 0 below it, NaN kept,
// in place allowed, and every element of an array whose length is no multiple of a vector. The
// softmax over chunks: float against double, in place, a NaN kept.
#include "models/exponentials.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ringtrain::models {
namespace {

std::int64_t ulpDistance(float a, float b) {
  return std::abs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) -
                  std::bit_cast<std::int32_t>(b));
}

TEST(ExponentialsTest, FloatIsWithinOneUlpOfStdExpOverTheNormalRange) {
  std::vector<float> x;
  for (float v = -87.3F; v < 88.3F; v += 0.00137F)
    x.push_back(v);
  std::vector<float> y(x.size());
  shiftedExponentials(x.data(), y.data(), static_cast<Index>(x.size()), 0.0F);
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_LE(ulpDistance(y[i], std::exp(x[i])), 1) << "exp(" << x[i] << ")";
}

TEST(ExponentialsTest, TheShiftIsTakenOffFirstAndZeroIsExact) {
  const std::vector<float> x{3.0F, 2.0F, -1.0F, 3.0F, 90.5F};
  std::vector<float> y(x.size());
  shiftedExponentials(x.data(), y.data(), static_cast<Index>(x.size()), 3.0F);
  EXPECT_EQ(y[0], 1.0F);
  EXPECT_EQ(y[3], 1.0F);
  EXPECT_LE(ulpDistance(y[1], std::exp(-1.0F)), 1);
  EXPECT_LE(ulpDistance(y[2], std::exp(-4.0F)), 1);
  EXPECT_LE(ulpDistance(y[4], std::exp(87.5F)), 1);
}

TEST(ExponentialsTest, BelowTheNormalRangeIsZeroAndNanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x{-87.4F, -1000.0F, -std::numeric_limits<float>::infinity(), nan};
  shiftedExponentials(x.data(), x.data(), static_cast<Index>(x.size()), 0.0F);  // in place
  EXPECT_EQ(x[0], 0.0F);
  EXPECT_EQ(x[1], 0.0F);
  EXPECT_EQ(x[2], 0.0F);
  EXPECT_TRUE(std::isnan(x[3]));
}

TEST(ExponentialsTest, EveryLengthGetsEveryElement) {
  for (Index n = 0; n <= 37; ++n) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i)
      x[static_cast<std::size_t>(i)] = -0.25F * static_cast<float>(i);
    std::vector<float> y(x.size(), -1.0F);
    shiftedExponentials(x.data(), y.data(), n, 0.5F);
    for (Index i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      ASSERT_LE(ulpDistance(y[k], std::exp(x[k] - 0.5F)), 1) << "n " << n << ", i " << i;
    }
  }
}

// Lengths across the chunk boundaries (512 values) with the largest value late, so the earlier
// chunks' exponentials are rescaled, and logits near 1000, where exp(z) alone would overflow.
TEST(ScaledSoftmaxTest, FloatMatchesDoubleWithTheMaximumInALateChunk) {
  for (const Index n : {Index{1}, Index{7}, Index{512}, Index{513}, Index{1500}, Index{50257}}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i)
      x[static_cast<std::size_t>(i)] = 1000.0F + 0.001F * static_cast<float>(i % 997);
    x.back() = 1003.0F;  // the maximum, in the last chunk
    std::vector<float> y(x.size());
    const auto totals = scaledSoftmax(x.data(), y.data(), n, 0.25F);
    const std::vector<double> xd(x.begin(), x.end());
    std::vector<double> yd(xd.size());
    const auto reference = scaledSoftmax(xd.data(), yd.data(), n, 0.25);
    EXPECT_EQ(totals.maximum, 1003.0F);
    EXPECT_NEAR(totals.sum, reference.sum, 1e-5 * reference.sum) << "n " << n;
    double total = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      ASSERT_NEAR(y[i], yd[i], 1e-5 * yd[i]) << "n " << n << ", i " << i;
      total += y[i];
    }
    EXPECT_NEAR(total, 0.25, 1e-5) << "n " << n;
  }
}

TEST(ScaledSoftmaxTest, InPlaceIsTheSameAsIntoAnotherArray) {
  std::vector<float> x(1300);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = 0.01F * static_cast<float>(i % 331);  // maxima in every chunk, the largest late
  std::vector<float> y(x.size());
  const auto apart = scaledSoftmax(x.data(), y.data(), static_cast<Index>(x.size()), 1.0F);
  const auto inPlace = scaledSoftmax(x.data(), x.data(), static_cast<Index>(x.size()), 1.0F);
  EXPECT_EQ(apart.maximum, inPlace.maximum);
  EXPECT_EQ(apart.sum, inPlace.sum);
  EXPECT_EQ(x, y);
}

TEST(ScaledSoftmaxTest, ANanReachesTheSumAndEveryValue) {
  std::vector<float> x(1200, 1.0F);
  x[700] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(x.size());
  const auto totals = scaledSoftmax(x.data(), y.data(), static_cast<Index>(x.size()), 1.0F);
  EXPECT_TRUE(std::isnan(totals.sum));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(std::isnan(y[1199]));
}

}  // namespace
}  // namespace ringtrain::models
