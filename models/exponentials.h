// The exponentials of the softmaxes (the loss's over the vocabulary, attention's over a column),
// vectorised: the loss's take a tenth of a GPT step through libm's one-at-a-time expf.
#pragma once

#include "models/tensor.h"

namespace ringtrain::models {

// out[i] = exp(in[i] − shift) for i < n; in and out may be the same array, not partly overlap.
// float: a polynomial within 1 ulp of std::exp, 0 below exp's normal range (x < −87.3) and the
// largest finite power of two's neighbourhood above 88.3; in AVX-512 or AVX2 vectors where the CPU
// has them. double: std::exp.
template <class Scalar>
void shiftedExponentials(const Scalar* in, Scalar* out, Index n, Scalar shift);

}  // namespace ringtrain::models
