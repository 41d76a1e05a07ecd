#include "models/transformer_kernels.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "base/vector_dispatch.h"
#include "models/exponentials.h"
#include "models/matrix_products.h"
#include "models/stage_clock.h"

namespace ringtrain::models {
namespace {

template <class Scalar>
using ColumnArray = Eigen::Map<const Eigen::Array<Scalar, Eigen::Dynamic, 1>>;

template <class Scalar>
Eigen::Array<Scalar, Eigen::Dynamic, 1> normalized(ConstBatchView<Scalar> x, Index n,
                                                   const Scalar* mean, const Scalar* rstd) {
  return (x.col(n).array() - mean[n]) * rstd[n];
}

}  // namespace

template <class Scalar>
void layerNormForward(ConstBatchView<Scalar> x, const Scalar* gamma, const Scalar* beta,
                      BatchView<Scalar> y, Scalar* mean, Scalar* rstd) {
  const Index width = x.rows();
  const StageScope stage(Stage::kLayerNorm,
                         bytesOf<Scalar>(2 * x.size() + 2 * x.cols() + 2 * width));
  const ColumnArray<Scalar> g(gamma, width);
  const ColumnArray<Scalar> b(beta, width);
  for (Index n = 0; n < x.cols(); ++n) {
    const auto column = x.col(n).array();
    const Scalar m = column.mean();
    const Scalar variance = (column - m).square().mean();
    const Scalar r = Scalar(1) / std::sqrt(variance + static_cast<Scalar>(kLayerNormEpsilon));
    mean[n] = m;
    rstd[n] = r;
    y.col(n).array() = (column - m) * r * g + b;
  }
}

template <class Scalar>
void layerNormBackwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy,
                                 const Scalar* mean, const Scalar* rstd, Scalar* dgamma,
                                 Scalar* dbeta) {
  const StageScope stage(Stage::kLayerNorm, bytesOf<Scalar>(2 * x.size() + 2 * x.rows()));
  Eigen::Map<Eigen::Array<Scalar, Eigen::Dynamic, 1>> dg(dgamma, x.rows());
  dg.setZero();
  for (Index n = 0; n < x.cols(); ++n)
    dg += dy.col(n).array() * normalized(x, n, mean, rstd);
  VectorView<Scalar>(dbeta, x.rows()).noalias() = dy.rowwise().sum();
}

template <class Scalar>
void layerNormBackwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy,
                            const Scalar* gamma, const Scalar* mean, const Scalar* rstd,
                            BatchView<Scalar> dx, bool accumulate) {
  const StageScope stage(Stage::kLayerNorm, bytesOf<Scalar>((accumulate ? 4 : 3) * x.size()));
  const ColumnArray<Scalar> gammas(gamma, x.rows());
  for (Index n = 0; n < x.cols(); ++n) {
    const auto xHat = normalized(x, n, mean, rstd);
    const Eigen::Array<Scalar, Eigen::Dynamic, 1> g = dy.col(n).array() * gammas;
    const Scalar meanG = g.mean();
    const Scalar meanGx = (g * xHat).mean();
    if (accumulate) {
      dx.col(n).array() += rstd[n] * (g - meanG - xHat * meanGx);
    } else {
      dx.col(n).array() = rstd[n] * (g - meanG - xHat * meanGx);
    }
  }
}

namespace {
constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2/π)
constexpr double kGeluCubic = 0.044715;

// float: plain loops in a chunk on the stack, tanh(u) = 1 − 2 / (e^{2u} + 1) through the vector
// exponential: every clone vectorises and nothing goes to the heap (Eigen's temporaries of a
// whole activation faulted in fresh pages every step). 2u at the exponential's clamps gives ±1.
constexpr Index kGeluChunk = 512;
constexpr auto kScale = static_cast<float>(kGeluScale);
constexpr auto kCubic = static_cast<float>(kGeluCubic);

// t = tanh(s (h + c h³)) for n ≤ kGeluChunk values.
RINGTRAIN_VECTOR_CLONES void geluTanh(const float* h, float* t, Index n) {
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    t[i] = 2 * kScale * (h[i] + kCubic * h[i] * h[i] * h[i]);
  shiftedExponentials(t, t, n, 0.0f);
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    t[i] = 1 - 2 / (t[i] + 1);
}

RINGTRAIN_VECTOR_CLONES void geluValues(const float* h, const float* t, float* g, Index n) {
#pragma omp simd
  for (Index i = 0; i < n; ++i)
    g[i] = 0.5f * h[i] * (1 + t[i]);
}

RINGTRAIN_VECTOR_CLONES void geluSlopes(const float* h, const float* t, const float* dg, float* dh,
                                        Index n) {
#pragma omp simd
  for (Index i = 0; i < n; ++i) {
    const float x = h[i];
    const float slope =
        0.5f * (1 + t[i]) + 0.5f * x * (1 - t[i] * t[i]) * kScale * (1 + 3 * kCubic * x * x);
    dh[i] = dg[i] * slope;
  }
}
// Calls use(i, t, n) for each chunk [i, i + n) of h, t holding its tanh(s (h + c h³)).
template <class Use>
void inGeluChunks(const float* h, Index count, Use use) {
  float t[kGeluChunk];
  for (Index i = 0; i < count; i += kGeluChunk) {
    const Index n = std::min(kGeluChunk, count - i);
    geluTanh(h + i, t, n);
    use(i, t, n);
  }
}
}  // namespace

template <class Scalar>
void geluForward(const Scalar* h, Scalar* g, Index count) {
  const StageScope stage(Stage::kGelu, bytesOf<Scalar>(2 * count));
  if constexpr (std::is_same_v<Scalar, float>) {
    inGeluChunks(h, count,
                 [&](Index i, const float* t, Index n) { geluValues(h + i, t, g + i, n); });
  } else {
    using Array = Eigen::Array<Scalar, Eigen::Dynamic, 1>;
    const Eigen::Map<const Array> x(h, count);
    const auto s = static_cast<Scalar>(kGeluScale);
    const auto c = static_cast<Scalar>(kGeluCubic);
    Eigen::Map<Array>(g, count) = Scalar(0.5) * x * (Scalar(1) + (s * (x + c * x.cube())).tanh());
  }
}

template <class Scalar>
void geluBackward(const Scalar* h, const Scalar* dg, Scalar* dh, Index count) {
  const StageScope stage(Stage::kGelu, bytesOf<Scalar>(3 * count));
  if constexpr (std::is_same_v<Scalar, float>) {
    inGeluChunks(h, count, [&](Index i, const float* t, Index n) {
      geluSlopes(h + i, t, dg + i, dh + i, n);
    });
  } else {
    using Array = Eigen::Array<Scalar, Eigen::Dynamic, 1>;
    const Eigen::Map<const Array> x(h, count);
    const auto s = static_cast<Scalar>(kGeluScale);
    const auto c = static_cast<Scalar>(kGeluCubic);
    const Array t = (s * (x + c * x.cube())).tanh();
    const Array slope =
        Scalar(0.5) * (Scalar(1) + t) +
        Scalar(0.5) * x * (Scalar(1) - t.square()) * s * (Scalar(1) + Scalar(3) * c * x.square());
    Eigen::Map<Array>(dh, count) = Eigen::Map<const Array>(dg, count) * slope;
  }
}

namespace {

// The per-sequence, per-head pieces of qkv: d×T blocks with the stride of qkv.
template <class View>
auto headBlock(View& m, Index part, const AttentionShape& shape, Index b, Index h) {
  const Index d = shape.width / shape.heads;
  return m.block(part * shape.width + h * d, b * shape.context, d, shape.context);
}

// Column i of `scores` (scaled by `scale` first) becomes softmax over rows j ≤ i, 0 below.
template <class Scalar>
void causalSoftmax(BatchView<Scalar> scores, Scalar scale) {
  const Index t = scores.rows();
  for (Index i = 0; i < t; ++i) {
    auto visible = scores.col(i).head(i + 1).array();
    visible *= scale;
    scaledSoftmax(visible.data(), visible.data(), i + 1, Scalar(1));
    scores.col(i).tail(t - i - 1).setZero();
  }
}

// One sequence and head's probabilities into p (T×T): forward's and backward's, the same bits.
template <class Scalar>
void headProbabilities(const AttentionShape& shape, ConstBatchView<Scalar> qkv, Index b, Index h,
                       Scalar scale, BatchView<Scalar> p) {
  product(p, headBlock(qkv, 1, shape, b, h).transpose(), headBlock(qkv, 0, shape, b, h));
  causalSoftmax(p, scale);
}

template <class Scalar>
Scalar attentionScale(const AttentionShape& shape) {
  return Scalar(1) / std::sqrt(static_cast<Scalar>(shape.width / shape.heads));
}

}  // namespace

template <class Scalar>
void attentionForward(const AttentionShape& shape, ConstBatchView<Scalar> qkv,
                      BatchView<Scalar> out, Scalar* scratch) {
  const Index t = shape.context;
  const Index sequences = qkv.cols() / t;
  const Scalar scale = attentionScale<Scalar>(shape);
  // Apart from its products: each head's T×T scores read and written once.
  const StageScope stage(Stage::kAttention, bytesOf<Scalar>(2 * sequences * shape.heads * t * t));
  BatchView<Scalar> p(scratch, t, t);
  for (Index b = 0; b < sequences; ++b) {
    for (Index h = 0; h < shape.heads; ++h) {
      headProbabilities(shape, qkv, b, h, scale, p);
      product(headBlock(out, 0, shape, b, h), headBlock(qkv, 2, shape, b, h), asConst(p));
    }
  }
}

template <class Scalar>
void attentionBackward(const AttentionShape& shape, ConstBatchView<Scalar> qkv,
                       ConstBatchView<Scalar> dOut, BatchView<Scalar> dqkv, Scalar* scratch) {
  const Index t = shape.context;
  const Index sequences = qkv.cols() / t;
  const Scalar scale = attentionScale<Scalar>(shape);
  BatchView<Scalar> p(scratch, t, t);
  BatchView<Scalar> dScores(scratch + t * t, t, t);
  // Apart from its products: the recomputed scores (read, written), then p and dScores read and
  // dScores written.
  const StageScope stage(Stage::kAttention, bytesOf<Scalar>(5 * sequences * shape.heads * t * t));
  for (Index b = 0; b < sequences; ++b) {
    for (Index h = 0; h < shape.heads; ++h) {
      headProbabilities(shape, qkv, b, h, scale, p);
      const auto dO = headBlock(dOut, 0, shape, b, h);
      product(headBlock(dqkv, 2, shape, b, h), dO, asConst(p).transpose());
      product(dScores, headBlock(qkv, 2, shape, b, h).transpose(), dO);
      // Softmax backward per column, then the 1/sqrt(d) of the scores.
      for (Index i = 0; i < t; ++i) {
        auto ds = dScores.col(i).head(i + 1).array();
        const auto pi = p.col(i).head(i + 1).array();
        ds = pi * (ds - (pi * ds).sum()) * scale;
        dScores.col(i).tail(t - i - 1).setZero();
      }
      product(headBlock(dqkv, 0, shape, b, h), headBlock(qkv, 1, shape, b, h), dScores);
      product(headBlock(dqkv, 1, shape, b, h), headBlock(qkv, 0, shape, b, h), dScores.transpose());
    }
  }
}

#define RINGTRAIN_INSTANTIATE(Scalar)                                                              \
  template void layerNormForward(ConstBatchView<Scalar>, const Scalar*, const Scalar*,             \
                                 BatchView<Scalar>, Scalar*, Scalar*);                             \
  template void layerNormBackwardParameters(ConstBatchView<Scalar>, ConstBatchView<Scalar>,        \
                                            const Scalar*, const Scalar*, Scalar*, Scalar*);       \
  template void layerNormBackwardInput(ConstBatchView<Scalar>, ConstBatchView<Scalar>,             \
                                       const Scalar*, const Scalar*, const Scalar*,                \
                                       BatchView<Scalar>, bool);                                   \
  template void geluForward(const Scalar*, Scalar*, Index);                                        \
  template void geluBackward(const Scalar*, const Scalar*, Scalar*, Index);                        \
  template void attentionForward(const AttentionShape&, ConstBatchView<Scalar>, BatchView<Scalar>, \
                                 Scalar*);                                                         \
  template void attentionBackward(const AttentionShape&, ConstBatchView<Scalar>,                   \
                                  ConstBatchView<Scalar>, BatchView<Scalar>, Scalar*);
RINGTRAIN_INSTANTIATE(float)
RINGTRAIN_INSTANTIATE(double)
#undef RINGTRAIN_INSTANTIATE

}  // namespace ringtrain::models
