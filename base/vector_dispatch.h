// Run-time choice of vector instructions, so that one binary built for the x86-64 baseline (the
// default build: it must not die with an illegal instruction on a node whose CPU differs from
// the build host's) still uses AVX2 or AVX-512 where the CPU has them.
//
// RINGTRAIN_VECTOR_CLONES before a hot loop's function (templates too) compiles it three times,
// for x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline; the loader picks one per
// process from the CPU (GCC's target_clones, an ifunc). It expands to nothing where that choice
// is already made at build time (-march with AVX-512, e.g. -DRINGTRAIN_ARCH=native here), with
// compilers other than GCC (Clang 14 cannot clone templates), and in sanitizer builds (an ifunc
// resolver runs before the sanitizer's runtime is ready).
//
// Code with intrinsics cannot be cloned (the baseline clone would not compile): such code has
// functions with __attribute__((target(...))) chosen by cpuHas() at run time instead.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define RINGTRAIN_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RINGTRAIN_VECTOR_CLONES
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace ringtrain::base {

enum class CpuFeature { kF16c, kAvx2, kFma, kAvx512f, kAvx512Core, kAvx512Bf16 };

#if defined(__x86_64__) && defined(__GNUC__)
// Bit `bit` of register `reg` (0 eax, 1 ebx, 2 ecx, 3 edx) of cpuid leaf `leaf`, `subleaf`: for the
// features Clang's __builtin_cpu_supports does not know (f16c, avx512bf16).
inline bool cpuidBit(unsigned leaf, unsigned subleaf, int reg, unsigned bit) {
  unsigned r[4] = {};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return ((r[reg] >> bit) & 1u) != 0;
}
#endif

// Whether this CPU (and the OS, for the vector registers) has the feature; false off x86-64.
// Before main (a static initialiser) call initCpuFeatures() first.
inline bool cpuHas(CpuFeature feature) {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (feature) {
    case CpuFeature::kF16c:
      return __builtin_cpu_supports("avx") && cpuidBit(1, 0, 2, 29);
    case CpuFeature::kAvx2:
      return __builtin_cpu_supports("avx2");
    case CpuFeature::kFma:
      return __builtin_cpu_supports("fma");
    case CpuFeature::kAvx512f:
      return __builtin_cpu_supports("avx512f");
    case CpuFeature::kAvx512Core:  // Skylake-X's set: F, BW, DQ, VL (x86-64-v4)
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    case CpuFeature::kAvx512Bf16:
      return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             cpuidBit(7, 1, 0, 5);
  }
#endif
  (void)feature;
  return false;
}

inline void initCpuFeatures() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
#endif
}

}  // namespace ringtrain::base
