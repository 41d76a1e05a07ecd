// The numerical pieces of a GPT-2 block that are not matrix products: layer normalisation, the
// tanh approximation of GELU and causal multi-head self-attention, forward and backward.
//
// Activations are column-major C×N blocks, one column per token (N = B·T, sample after sample,
// position after position), as every layer of models/ sees a batch (tensor.h).
#pragma once

#include "models/tensor.h"

namespace ringtrain::models {

inline constexpr double kLayerNormEpsilon = 1e-5;  // GPT-2's

// Per column n: y = (x − mean) · rstd ⊙ gamma + beta, rstd = 1/sqrt(var + eps); mean and rstd (N
// values each) are kept for backward.
template <class Scalar>
void layerNormForward(ConstBatchView<Scalar> x, const Scalar* gamma, const Scalar* beta,
                      BatchView<Scalar> y, Scalar* mean, Scalar* rstd);
// The parameter gradients (overwritten): dgamma = Σ_n dy ⊙ x̂, dbeta = Σ_n dy.
template <class Scalar>
void layerNormBackwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy,
                                 const Scalar* mean, const Scalar* rstd, Scalar* dgamma,
                                 Scalar* dbeta);
// dx = rstd · (g − mean(g) − x̂ · mean(g ⊙ x̂)) with g = dy ⊙ gamma; added to dx when `accumulate`
// (a residual branch), written otherwise.
template <class Scalar>
void layerNormBackwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy,
                            const Scalar* gamma, const Scalar* mean, const Scalar* rstd,
                            BatchView<Scalar> dx, bool accumulate);

// g = 0.5 h (1 + tanh(sqrt(2/π) (h + 0.044715 h³))), element-wise over `count` values.
template <class Scalar>
void geluForward(const Scalar* h, Scalar* g, Index count);
// dh = dg ⊙ GELU'(h).
template <class Scalar>
void geluBackward(const Scalar* h, const Scalar* dg, Scalar* dh, Index count);

// Sizes of causal self-attention over a batch of sequences.
struct AttentionShape {
  Index width = 0;  // C; the heads' widths are C / heads
  Index heads = 0;
  Index context = 0;  // T: the tokens of one sequence
};

// qkv: 3C×N, rows [0, C) the queries, [C, 2C) the keys, [2C, 3C) the values, head h in rows
// [h·C/H, (h+1)·C/H) of each. For each sequence and head, query i attends to keys j ≤ i with
// softmax(q·k / sqrt(C/H)). Writes out (C×N, heads side by side like the queries); scratch holds
// one sequence and head's T×T probabilities (column i the weights of query i) at a time.
template <class Scalar>
void attentionForward(const AttentionShape& shape, ConstBatchView<Scalar> qkv,
                      BatchView<Scalar> out, Scalar* scratch);
// From dOut (C×N) to dqkv (3C×N, overwritten); scratch holds 2·T·T values. The probabilities are
// recomputed from qkv, one sequence and head at a time, by forward's own steps (the same bits),
// instead of being kept: L·B·H·T² values, 2.25 GiB at GPT-2 124M's context 1024 and batch 4.
template <class Scalar>
void attentionBackward(const AttentionShape& shape, ConstBatchView<Scalar> qkv,
                       ConstBatchView<Scalar> dOut, BatchView<Scalar> dqkv, Scalar* scratch);

}  // namespace ringtrain::models
