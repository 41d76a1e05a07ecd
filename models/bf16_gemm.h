// Matrix products with bfloat16 inputs and float32 accumulation on CPUs with AVX512-BF16.
//
// C = A·B (or C += A·B) where A and B are float32 in memory, rounded to bfloat16 (nearest, ties
// to even) as they are packed, multiplied in pairs by vdpbf16ps and summed in float32. The rest
// of the build stays portable: only this file's kernels are compiled for AVX512-BF16, and
// callers ask bf16ProductsSupported() before calling bf16Product().
#pragma once

#include <Eigen/Core>

namespace ringtrain::models {

// A float32 matrix anywhere in memory: element (i, j) at data[i * rowStride + j * colStride].
template <class Pointer>
struct StridedMatrix {
  Pointer data = nullptr;
  Eigen::Index rows = 0;
  Eigen::Index cols = 0;
  Eigen::Index rowStride = 1;
  Eigen::Index colStride = 1;
};
using ConstStrided = StridedMatrix<const float*>;
using MutableStrided = StridedMatrix<float*>;

// True when this CPU has the AVX512-BF16 instructions bf16Product() needs.
bool bf16ProductsSupported();

// c = a·b, or c += a·b with `accumulate`. c must not overlap a or b, and one of its strides
// must be 1 (column- or row-major). a.cols == b.rows, c is a.rows × b.cols.
void bf16Product(const ConstStrided& a, const ConstStrided& b, const MutableStrided& c,
                 bool accumulate);

}  // namespace ringtrain::models
