#include "models/exponentials.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/vector_dispatch.h"

namespace ringtrain::models {
namespace {

// exp(x) = 2^n · exp(r), n = round(x / ln 2), r = x − n ln 2 in [−ln2/2, ln2/2] (ln 2 in two parts,
// so n ln 2 is exact enough), exp(r) by Cephes's degree-7 polynomial. The rounding adds and takes
// away 1.5 · 2^23, which leaves the integer nearest. Selects, not branches, so the loops calling it
// vectorise (with -fno-trapping-math, models/CMakeLists.txt).
[[gnu::always_inline]] inline float exponential(float raw) {
  constexpr float kLow = -87.33654F;  // exp(kLow) = 2^−126, the smallest normal float
  constexpr float kHigh = 88.37626F;  // below 128 ln 2: 2^n stays a finite float
  constexpr float kRound = 12582912.0F;
  float x = raw < kLow ? kLow : raw;
  x = x > kHigh ? kHigh : x;
  const float rounded = (x * 1.44269504F + kRound) - kRound;
  const float r = (x - rounded * 0.693359375F) - rounded * -2.12194440e-4F;
  float p = 1.9875691500e-4F;
  p = p * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = p * r * r + r + 1.0F;
  const std::int32_t power = raw < kLow ? 0 : static_cast<std::int32_t>(rounded) + 127;
  return p * std::bit_cast<float>(power << 23);  // 2^(power − 127); 0 for power 0
}

RINGTRAIN_VECTOR_CLONES void exponentialsFloat(const float* in, float* out, Index n, float shift) {
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    out[i] = exponential(in[i] - shift);
}

// The largest of in[0..n), −∞ for none; a NaN is passed over (it reaches the sum instead).
RINGTRAIN_VECTOR_CLONES float maximumOf(const float* in, Index n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (Index i = 0; i < n; ++i)
    m = in[i] > m ? in[i] : m;
  return m;
}

// out[i] = exp(in[i] − shift); returns their sum.
RINGTRAIN_VECTOR_CLONES float exponentialsSum(const float* in, float* out, Index n, float shift) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (Index i = 0; i < n; ++i) {
    out[i] = exponential(in[i] - shift);
    sum += out[i];
  }
  return sum;
}

RINGTRAIN_VECTOR_CLONES void scaleBy(float* out, Index n, float factor) {
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    out[i] *= factor;
}

// At most kChunks chunks of at least kChunk values (L1-sized), so the shifts fit on the stack.
constexpr Index kChunk = 512;
constexpr Index kChunks = 256;

}  // namespace

void shiftedExponentials(const float* in, float* out, Index n, float shift) {
  exponentialsFloat(in, out, n, shift);
}

template <>
SoftmaxTotals<float> scaledSoftmax(const float* in, float* out, Index n, float factor) {
  const Index chunk = std::max(kChunk, (n + kChunks - 1) / kChunks);
  std::array<float, kChunks> shifts{};  // the maximum each chunk's exponentials were taken from
  SoftmaxTotals<float> totals{-std::numeric_limits<float>::infinity(), 0.0F};
  for (Index start = 0, c = 0; start < n; start += chunk, ++c) {
    const Index length = std::min(chunk, n - start);
    const float maximum = std::max(totals.maximum, maximumOf(in + start, length));
    if (maximum > totals.maximum) {  // the sum so far was taken from a smaller maximum
      totals.sum *= exponential(totals.maximum - maximum);
      totals.maximum = maximum;
    }
    shifts[static_cast<std::size_t>(c)] = maximum;
    totals.sum += exponentialsSum(in + start, out + start, length, maximum);
  }
  const float scale = factor / totals.sum;
  for (Index start = 0, c = 0; start < n; start += chunk, ++c) {
    const float shift = shifts[static_cast<std::size_t>(c)];
    scaleBy(out + start, std::min(chunk, n - start),
            shift == totals.maximum ? scale : scale * exponential(shift - totals.maximum));
  }
  return totals;
}

template <>
SoftmaxTotals<double> scaledSoftmax(const double* in, double* out, Index n, double factor) {
  SoftmaxTotals<double> totals{*std::max_element(in, in + n), 0.0};
  for (Index i = 0; i < n; ++i) {
    out[i] = std::exp(in[i] - totals.maximum);
    totals.sum += out[i];
  }
  const double scale = factor / totals.sum;
  for (Index i = 0; i < n; ++i)
    out[i] *= scale;
  return totals;
}

}  // namespace ringtrain::models
