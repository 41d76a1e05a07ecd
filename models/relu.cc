#include "models/relu.h"

#include "base/vector_dispatch.h"

namespace ringtrain::models {
namespace {

// Plain loops with `omp simd`: they compile to masked vector instructions, where an Eigen
// select() expression over booleans may not vectorise. `x < 0 ? 0 : x` rather than
// `x > 0 ? x : 0`: a NaN passes through instead of being hidden, so a diverging run still shows
// NaN in its loss.
template <class Scalar>
RINGTRAIN_VECTOR_CLONES void reluForward(const Scalar* in, Scalar* out, Index n) {
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    out[i] = in[i] < Scalar(0) ? Scalar(0) : in[i];
}

template <class Scalar>
RINGTRAIN_VECTOR_CLONES void reluBackward(const Scalar* out, const Scalar* gradOut, Scalar* gradIn,
                                          Index n) {
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    gradIn[i] = out[i] > Scalar(0) ? gradOut[i] : Scalar(0);
}

}  // namespace

template <class Scalar>
void Relu<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  reluForward(x.data(), y.data(), x.size());
}

template <class Scalar>
void Relu<Scalar>::backwardInput(ConstBatchView<Scalar> /*x*/, ConstBatchView<Scalar> y,
                                 ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  reluBackward(y.data(), dy.data(), dx.data(), y.size());
}

template class Relu<float>;
template class Relu<double>;

}  // namespace ringtrain::models
