// Which library computes the models' matrix products: Eigen's own kernels, or OpenBLAS when the
// build hands them over (RINGTRAIN_BLAS, EIGEN_USE_BLAS). Only the serial build of OpenBLAS is
// linked, so that a rank keeps to one thread. With bfloat16 precision the float32 products go to
// bf16_gemm.h instead: every layer multiplies through product() below, the one place that
// knows the precision.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "base/named_values.h"
#include "models/bf16_gemm.h"
#include "models/stage_clock.h"

namespace ringtrain::models {

struct MatrixProducts {
  bool blas = false;       // the products go to a BLAS library (EIGEN_USE_BLAS)
  bool sequential = true;  // that library runs them on the calling thread only
  std::string name;        // e.g. "OpenBLAS 0.3.21 (serial, Zen)" or "Eigen 3.4.0"
};

// What this build links, asked of the library itself where it can tell.
MatrixProducts matrixProducts();

// The CPU's widest float32 vectors that the OS enables, as OpenBLAS's x86-64 kernels group them.
enum class VectorWidth { kNarrow, kAvx2, kAvx512 };
VectorWidth cpuVectorWidth();

// The OpenBLAS kernels to ask for where `chosen` (its core name) does not use `cpu`'s vectors,
// else "": a DYNAMIC_ARCH OpenBLAS older than the CPU takes a model it does not know for its
// oldest kernels (0.3.21 ran Prescott's SSE3 kernels, 20% of the FMA peak, on an AVX-512 Xeon
// where SkylakeX's reached 78%).
std::string widerBlasKernels(std::string_view chosen, VectorWidth cpu);

// Has OpenBLAS choose its kernels again as if OPENBLAS_CORETYPE were `core`; true when it now
// runs them. Otherwise (a build for one CPU, an unknown name) the earlier kernels stay. Call
// only while no product runs. Without OpenBLAS, false.
bool useBlasKernels(std::string_view core);

// Keeps the products on the calling thread even where the loader found a threaded OpenBLAS in
// place of the serial one (the alternatives of a Debian system can do that when the binary has
// lost its run path); nothing to do for Eigen's own kernels or the serial build.
void keepMatrixProductsOnOneThread();

// The float32 models' matrix products: float32 throughout, or bfloat16 inputs with float32
// accumulation (bf16_gemm.h). Double models always multiply in double.
enum class Precision { kFloat32, kBfloat16 };
inline constexpr NamedValue<Precision> kPrecisionNames[] = {{Precision::kFloat32, "fp32"},
                                                            {Precision::kBfloat16, "bf16"}};

// Process-wide, like OpenBLAS's thread count: set once before training (or around a test).
// kBfloat16 needs bf16ProductsSupported(); the caller checks that and refuses otherwise.
void setMatrixPrecision(Precision precision);
Precision matrixPrecision();

// An Eigen expression with direct access as bf16_gemm.h's operand (const data when it is const).
template <class Expression>
auto strided(Expression&& m) {
  using Pointer = decltype(m.data());
  return StridedMatrix<Pointer>{m.data(), m.rows(), m.cols(), m.rowStride(), m.colStride()};
}

// dst = lhs·rhs, or dst += lhs·rhs with `accumulate`, in matrixPrecision(). The float32 path is
// exactly Eigen's product. Operands are Eigen expressions with direct access (matrices, maps,
// blocks of them, their transposes); dst must not alias them.
template <class Dst, class Lhs, class Rhs>
void product(Dst&& dst, const Lhs& lhs, const Rhs& rhs, bool accumulate = false) {
  const StageScope stage(Stage::kProducts);
  using Scalar = typename std::decay_t<Dst>::Scalar;
  if constexpr (std::is_same_v<Scalar, float>) {
    if (matrixPrecision() == Precision::kBfloat16) {
      bf16Product(strided(lhs), strided(rhs), strided(dst), accumulate);
      return;
    }
  }
  if (accumulate) {
    dst.noalias() += lhs * rhs;
  } else {
    dst.noalias() = lhs * rhs;
  }
}

}  // namespace ringtrain::models
