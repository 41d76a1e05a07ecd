// The element-wise reductions: every type and op against a scalar reference, in place on either
// operand, the final division of an average, wrap-around integer sums, and min/max that give the
// same bits whichever operand comes first.
#include "collectives/reduce_kernels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ringtrain::collectives {
namespace {

template <class T>
std::vector<T> ramp(std::size_t n, double scale, double offset) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = std::sin(static_cast<double>(i) * 0.7) * scale + offset;
    if constexpr (std::is_same_v<T, Float16>) {
      v[i] = toFloat16(static_cast<float>(x));
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      v[i] = toBFloat16(static_cast<float>(x));
    } else {
      v[i] = static_cast<T>(x);
    }
  }
  return v;
}

template <class T>
double asDouble(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return toFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

// The result of one element, computed the slow, obvious way in the type's working precision.
template <class T>
double expectedElement(ReduceOp op, T a, T b, int divisor) {
  using Work =
      std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
  const Work x = static_cast<Work>(asDouble(a));
  const Work y = static_cast<Work>(asDouble(b));
  Work r = op == ReduceOp::kMin ? std::min(x, y) : op == ReduceOp::kMax ? std::max(x, y) : x + y;
  if (divisor > 1) r = r / static_cast<Work>(divisor);
  if constexpr (std::is_same_v<T, Float16>) return toFloat(toFloat16(r));
  if constexpr (std::is_same_v<T, BFloat16>) return toFloat(toBFloat16(r));
  return static_cast<double>(r);
}

template <class T>
void checkAllOps() {
  // 1000 is not a multiple of any vector width or of the 16-bit block size; 1537 spans blocks.
  for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{1537}}) {
    const auto a = ramp<T>(n, 100, 3);
    const auto b = ramp<T>(n, 50, -7);
    for (const ReduceOp op : kAllReduceOps) {
      for (const int divisor : {1, 3}) {
        std::vector<T> out(n), inPlaceA = a, inPlaceB = b;
        reduceArrays(dataTypeOf<T>(), op, a.data(), b.data(), out.data(), n, divisor);
        reduceArrays(dataTypeOf<T>(), op, inPlaceA.data(), b.data(), inPlaceA.data(), n, divisor);
        reduceArrays(dataTypeOf<T>(), op, a.data(), inPlaceB.data(), inPlaceB.data(), n, divisor);
        for (std::size_t i = 0; i < n; ++i) {
          const double expected = expectedElement(op, a[i], b[i], divisor);
          ASSERT_EQ(asDouble(out[i]), expected) << name(op) << " element " << i;
          ASSERT_EQ(asDouble(inPlaceA[i]), expected) << "in place on a";
          ASSERT_EQ(asDouble(inPlaceB[i]), expected) << "in place on b";
        }
      }
    }
  }
}

TEST(ReduceKernelsTest, Float32) {
  checkAllOps<float>();
}
TEST(ReduceKernelsTest, Float64) {
  checkAllOps<double>();
}
TEST(ReduceKernelsTest, Float16) {
  checkAllOps<Float16>();
}
TEST(ReduceKernelsTest, BFloat16) {
  checkAllOps<BFloat16>();
}
TEST(ReduceKernelsTest, Int32) {
  checkAllOps<std::int32_t>();
}
TEST(ReduceKernelsTest, Int64) {
  checkAllOps<std::int64_t>();
}

TEST(ReduceKernelsTest, IntegerSumsWrapAroundInsteadOfOverflowing) {
  const std::int32_t a[] = {std::numeric_limits<std::int32_t>::max()};
  const std::int32_t b[] = {1};
  std::int32_t out[1];
  reduceArrays(DataType::kInt32, ReduceOp::kSum, a, b, out, 1);
  EXPECT_EQ(out[0], std::numeric_limits<std::int32_t>::min());
}

TEST(ReduceKernelsTest, MinAndMaxGiveTheSameBitsInEitherOrder) {
  const float values[] = {0.0f, -0.0f, 1.0f, NAN, -INFINITY};
  for (const ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    for (const float x : values) {
      for (const float y : values) {
        float xy, yx;
        reduceArrays(DataType::kFloat32, op, &x, &y, &xy, 1);
        reduceArrays(DataType::kFloat32, op, &y, &x, &yx, 1);
        if (std::isnan(x) || std::isnan(y)) {
          EXPECT_TRUE(std::isnan(xy) && std::isnan(yx)) << "NaN must propagate";
        } else {
          EXPECT_EQ(std::bit_cast<std::uint32_t>(xy), std::bit_cast<std::uint32_t>(yx))
              << name(op) << "(" << x << ", " << y << ")";
        }
      }
    }
  }
  float zero = 0.0f, negativeZero = -0.0f, out;
  reduceArrays(DataType::kFloat32, ReduceOp::kMin, &zero, &negativeZero, &out, 1);
  EXPECT_TRUE(std::signbit(out)) << "min(+0, -0) is -0";
  reduceArrays(DataType::kFloat32, ReduceOp::kMax, &negativeZero, &zero, &out, 1);
  EXPECT_FALSE(std::signbit(out)) << "max(-0, +0) is +0";
}

TEST(ReduceKernelsTest, DivideArrayTruncatesIntegersAndRoundsFloatsOnce) {
  std::int64_t ints[] = {7, -7, 9};
  divideArray(DataType::kInt64, ints, 3, 2);
  EXPECT_EQ(ints[0], 3);
  EXPECT_EQ(ints[1], -3);
  EXPECT_EQ(ints[2], 4);
  float floats[] = {1.0f, 10.0f};
  divideArray(DataType::kFloat32, floats, 2, 3);
  EXPECT_EQ(floats[0], 1.0f / 3.0f);
  EXPECT_EQ(floats[1], 10.0f / 3.0f);
}

}  // namespace
}  // namespace ringtrain::collectives
