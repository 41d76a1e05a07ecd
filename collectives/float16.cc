#include "collectives/float16.h"

#include <bit>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/vector_dispatch.h"

namespace ringtrain::collectives {
namespace portable {

float float16ToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: the value is mantissa * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) | sign);
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint16_t floatToFloat16(float value) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u;  // NaN: a quiet NaN
  // 65520 = 65504 + half an ulp rounds up to infinity (ties to even: 65504's mantissa is odd).
  if (x >= 0x477ff000u) return sign | 0x7c00u;
  if (x < 0x38800000u) {
    // Below 2^-14 the result is subnormal (or zero). Adding 0.5 shifts the value so that float32's
    // own round-to-nearest-even lines up with float16's subnormal step of 2^-24; the low mantissa
    // bits are then the answer.
    const float shifted = std::bit_cast<float>(x) + 0.5f;
    return sign | static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest,
  // ties to even (add 0xfff plus the lowest kept bit, then truncate).
  const std::uint32_t lowestKeptBit = (x >> 13) & 1u;
  x += 0xc8000fffu + lowestKeptBit;  // 0xc8000000 subtracts 112 from the exponent (mod 2^32)
  return sign | static_cast<std::uint16_t>(x >> 13);
}

}  // namespace portable

float toFloat(BFloat16 value) {
  return std::bit_cast<float>(std::uint32_t{value.bits} << 16);
}

BFloat16 toBFloat16(float value) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((x >> 16) | 0x40u)};
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest, ties to even
  return {static_cast<std::uint16_t>(x >> 16)};
}

#if defined(__F16C__)
float toFloat(Float16 value) {
  return _cvtsh_ss(value.bits);
}
Float16 toFloat16(float value) {
  return {static_cast<std::uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT))};
}
#else
float toFloat(Float16 value) {
  return portable::float16ToFloat(value.bits);
}
Float16 toFloat16(float value) {
  return {portable::floatToFloat16(value)};
}
#endif

namespace {

#if defined(__x86_64__)
// The F16C instructions, 8 values at a time, for CPUs that have them (chosen at run time: the
// default build targets the x86-64 baseline, which lacks them).
__attribute__((target("avx,f16c"))) void toFloatF16c(const Float16* in, float* out,
                                                     std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m128i h;
    std::memcpy(&h, in + i, sizeof(h));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i)
    out[i] = _cvtsh_ss(in[i].bits);
}

__attribute__((target("avx,f16c"))) void fromFloatF16c(const float* in, Float16* out,
                                                       std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    std::memcpy(static_cast<void*>(out + i), &h, sizeof(h));
  }
  for (; i < count; ++i)
    out[i] = {static_cast<std::uint16_t>(_cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT))};
}

const bool kHasF16c = base::cpuHas(base::CpuFeature::kF16c);
#else
constexpr bool kHasF16c = false;
void toFloatF16c(const Float16*, float*, std::size_t) {}
void fromFloatF16c(const float*, Float16*, std::size_t) {}
#endif

}  // namespace

void convertToFloat(const Float16* in, float* out, std::size_t count) {
  if (kHasF16c) return toFloatF16c(in, out, count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = toFloat(in[i]);
}

void convertFromFloat(const float* in, Float16* out, std::size_t count) {
  if (kHasF16c) return fromFloatF16c(in, out, count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = toFloat16(in[i]);
}

RINGTRAIN_VECTOR_CLONES void convertToFloat(const BFloat16* in, float* out, std::size_t count) {
#pragma omp simd
  for (std::size_t i = 0; i < count; ++i)
    out[i] = toFloat(in[i]);
}

RINGTRAIN_VECTOR_CLONES void convertFromFloat(const float* in, BFloat16* out,
                                              std::size_t count) {
#pragma omp simd
  for (std::size_t i = 0; i < count; ++i)
    out[i] = toBFloat16(in[i]);
}

}  // namespace ringtrain::collectives
