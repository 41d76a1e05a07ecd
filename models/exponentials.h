// The exponentials of the softmaxes (the loss's over the vocabulary, attention's over a column),
// vectorised: the loss's take a tenth of a GPT step through libm's one-at-a-time expf.
#pragma once

#include "models/tensor.h"

namespace ringtrain::models {

// out[i] = exp(in[i] − shift) for i < n; in and out may be the same array, not partly overlap.
// A polynomial within 1 ulp of std::exp, 0 below exp's normal range (x < −87.3) and the largest
// finite power of two's neighbourhood above 88.3; in AVX-512 or AVX2 vectors where the CPU has
// them. (GELU's tanh; the softmaxes go through scaledSoftmax.)
void shiftedExponentials(const float* in, float* out, Index n, float shift);

template <class Scalar>
struct SoftmaxTotals {
  Scalar maximum;  // m = max in[i]
  Scalar sum;      // Σ exp(in[i] − m), at least 1
};

// out[i] = factor · exp(in[i] − m) / Σ_j exp(in[j] − m) for i < n > 0; in and out may be the same
// array, not partly overlap. float reads `in` once, a chunk at a time: a chunk's exponentials are
// taken from the largest value seen so far and rescaled when the pass over out (then in cache)
// divides by the sum. So the loss's 50,257-value column comes from memory once, not once for the
// maximum and again for the exponentials. The loss's softmax and attention's.
template <class Scalar>
SoftmaxTotals<Scalar> scaledSoftmax(const Scalar* in, Scalar* out, Index n, Scalar factor);

}  // namespace ringtrain::models
