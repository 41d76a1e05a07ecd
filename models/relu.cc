#include "models/relu.h"

namespace ringtrain::models {

// Plain loops with `omp simd`: they compile to masked vector instructions, where an Eigen
// select() expression over booleans may not vectorise.
template <class Scalar>
void Relu<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const Scalar* in = x.data();
  Scalar* out = y.data();
  const Index n = x.size();
  // `x < 0 ? 0 : x` rather than `x > 0 ? x : 0`: a NaN passes through instead of being hidden,
  // so a diverging run still shows NaN in its loss.
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    out[i] = in[i] < Scalar(0) ? Scalar(0) : in[i];
}

template <class Scalar>
void Relu<Scalar>::backwardInput(ConstBatchView<Scalar> /*x*/, ConstBatchView<Scalar> y,
                                 ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  const Scalar* out = y.data();
  const Scalar* gradOut = dy.data();
  Scalar* gradIn = dx.data();
  const Index n = y.size();
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    gradIn[i] = out[i] > Scalar(0) ? gradOut[i] : Scalar(0);
}

template class Relu<float>;
template class Relu<double>;

}  // namespace ringtrain::models
