#include "models/exponentials.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "base/vector_dispatch.h"

namespace ringtrain::models {
namespace {

// exp(x) = 2^n · exp(r), n = round(x / ln 2), r = x − n ln 2 in [−ln2/2, ln2/2] (ln 2 in two parts,
// so n ln 2 is exact enough), exp(r) by Cephes's degree-7 polynomial. The rounding adds and takes
// away 1.5 · 2^23, which leaves the integer nearest. Selects, not branches, so the loop vectorises
// (with -fno-trapping-math, models/CMakeLists.txt).
RINGTRAIN_VECTOR_CLONES void exponentialsFloat(const float* in, float* out, Index n, float shift) {
  constexpr float kLow = -87.33654F;  // exp(kLow) = 2^−126, the smallest normal float
  constexpr float kHigh = 88.37626F;  // below 128 ln 2: 2^n stays a finite float
  constexpr float kRound = 12582912.0F;
#pragma omp simd
  for (Index i = 0; i < n; ++i) {
    const float raw = in[i] - shift;
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
    out[i] = p * std::bit_cast<float>(power << 23);  // 2^(power − 127); 0 for power 0
  }
}

}  // namespace

template <>
void shiftedExponentials(const float* in, float* out, Index n, float shift) {
  exponentialsFloat(in, out, n, shift);
}

template <>
void shiftedExponentials(const double* in, double* out, Index n, double shift) {
  for (Index i = 0; i < n; ++i)
    out[i] = std::exp(in[i] - shift);
}

}  // namespace ringtrain::models
