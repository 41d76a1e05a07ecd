// LinearRegressionDataset: samples lie on y = 2x + 10 with the stated noise, deterministically.
#include "data/linear_regression_dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "data/data_error.h"

namespace ringtrain::data {
namespace {

std::vector<std::int64_t> all(std::int64_t n) {
  std::vector<std::int64_t> indices(static_cast<std::size_t>(n));
  std::iota(indices.begin(), indices.end(), 0);
  return indices;
}

TEST(LinearRegressionDatasetTest, LeastSquaresOnTheSamplesRecoversSlopeInterceptAndNoise) {
  LinearRegressionOptions o;
  o.size = 20000;
  const LinearRegressionDataset data(o);
  std::vector<float> x(20000), y(20000);
  data.gather(all(20000), x.data(), y.data());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_GE(x[i], -1.0f);
    EXPECT_LT(x[i], 1.0f);
    sx += x[i];
    sy += y[i];
    sxx += x[i] * double{x[i]};
    sxy += x[i] * double{y[i]};
  }
  const double n = 20000;
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double intercept = (sy - slope * sx) / n;
  EXPECT_NEAR(slope, 2.0, 0.01);
  EXPECT_NEAR(intercept, 10.0, 0.01);
  double residual = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - (slope * x[i] + intercept);
    residual += r * r;
  }
  EXPECT_NEAR(std::sqrt(residual / n), 0.1, 0.005);
}

TEST(LinearRegressionDatasetTest, ASampleDependsOnlyOnSeedAndIndex) {
  LinearRegressionOptions o;
  const LinearRegressionDataset a(o), b(o);
  std::vector<float> xa(8000), ya(8000), xb(3), yb(3);
  a.gather(all(8000), xa.data(), ya.data());
  const std::vector<std::int64_t> some = {7999, 3, 1234};
  b.gather(some, xb.data(), yb.data());
  for (std::size_t j = 0; j < some.size(); ++j) {
    EXPECT_EQ(xb[j], xa[static_cast<std::size_t>(some[j])]);
    EXPECT_EQ(yb[j], ya[static_cast<std::size_t>(some[j])]);
  }
  o.seed = 43;
  const LinearRegressionDataset other(o);
  other.gather(some, xb.data(), yb.data());
  EXPECT_NE(xb[0], xa[7999]);
}

TEST(LinearRegressionDatasetTest, BadOptionsAndIndicesAreRejected) {
  LinearRegressionOptions o;
  o.size = 0;
  EXPECT_THROW(LinearRegressionDataset{o}, DataError);
  o.size = 10;
  const LinearRegressionDataset data(o);
  float x, y;
  const std::int64_t outside = 10;
  EXPECT_THROW(data.gather({&outside, 1}, &x, &y), std::out_of_range);
}

}  // namespace
}  // namespace ringtrain::data
