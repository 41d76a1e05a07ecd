// IEEE binary16 (float16) and bfloat16 as 16-bit storage types, converted through float32.
//
// collectives/ depends on MPI alone (see docs/design.md), so these small types live here rather than
// pulling in Eigen's; the CUDA code uses cuda_fp16.h's types, which have the same bit layout.
// Conversions to 16 bits round to nearest, ties to even; a NaN stays a (quiet) NaN.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain::collectives {

struct Float16 {
  std::uint16_t bits = 0;
};
struct BFloat16 {
  std::uint16_t bits = 0;
};

float toFloat(Float16 value);
float toFloat(BFloat16 value);
Float16 toFloat16(float value);
BFloat16 toBFloat16(float value);

// Array conversions used by the reduction kernels; they use the F16C instructions when the build
// targets a CPU that has them (-march=native on any x86-64 of the last decade).
void convertToFloat(const Float16* in, float* out, std::size_t count);
void convertToFloat(const BFloat16* in, float* out, std::size_t count);
void convertFromFloat(const float* in, Float16* out, std::size_t count);
void convertFromFloat(const float* in, BFloat16* out, std::size_t count);

// The portable bit-manipulation conversions, exposed so tests can compare them with F16C.
namespace portable {
float float16ToFloat(std::uint16_t bits);
std::uint16_t floatToFloat16(float value);
}  // namespace portable

}  // namespace ringtrain::collectives
