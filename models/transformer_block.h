// One GPT-2 block ("h.0", "h.1", ...): pre-LayerNorm causal self-attention and a 4C-wide GELU
// MLP, each with its residual connection:
//   x2 = x + attn.c_proj(attention(attn.c_attn(ln_1(x))))
//   y  = x2 + mlp.c_proj(gelu(mlp.c_fc(ln_2(x2))))
// Parameters, in this order (dense weights {out, in}, row-major like every models/ weight):
//   ln_1.weight {C}, ln_1.bias {C}, attn.c_attn.weight {3C, C}, attn.c_attn.bias {3C},
//   attn.c_proj.weight {C, C}, attn.c_proj.bias {C}, ln_2.weight {C}, ln_2.bias {C},
//   mlp.c_fc.weight {4C, C}, mlp.c_fc.bias {4C}, mlp.c_proj.weight {C, 4C}, mlp.c_proj.bias {C}.
// Backward: backwardParameters runs the whole chain down to ln_1 (the parameter gradients need
// it) and keeps the two gradients that make up dx; backwardInput adds them up.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/layer.h"
#include "models/transformer_kernels.h"

namespace ringtrain::models {

// Scratch shared by the blocks of one model (one block runs at a time): backward's 4C×N, C×N
// twice and 3C×N values, and attention's 2·T·T (forward's and backward's probabilities of one
// sequence and head, which backward recomputes rather than every block keeping B·H·T² of them).
template <class Scalar>
struct BlockScratch {
  Workspace<Scalar> hidden;    // d(gelu output), then d(mlp.c_fc output)
  Workspace<Scalar> narrow;    // d(ln_2 output), then d(attention output), then d(ln_1 output)
  Workspace<Scalar> residual;  // d(x2)
  Workspace<Scalar> qkv;       // d(attn.c_attn output)
  Workspace<Scalar> scores;    // one sequence and head's probabilities and their gradient
};

template <class Scalar>
class TransformerBlock final : public Layer<Scalar> {
 public:
  // `layers` (L) scales the residual projections' initialisation by 1/sqrt(2L), as GPT-2 does.
  TransformerBlock(std::string name, const AttentionShape& shape, Index layers,
                   std::shared_ptr<BlockScratch<Scalar>> scratch);
  std::string_view kind() const override { return "transformer_block"; }
  std::vector<ParameterShape> parameterShapes() const override;
  void initialize(SplitMix64& generator) override;
  void reserve(Index batch) override;
  // What forward keeps, and the scratch the blocks share (the same addresses in every block).
  void listWorkspaces(HeldMemoryList& held) const override;
  double forwardFlopsPerSample() const override;
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

 private:
  struct Dense {  // a dense sub-layer: where its weight {out, in} and bias {out} lie
    Index offset = 0;
    Index in = 0;
    Index out = 0;
  };
  void denseForward(const Dense& dense, ConstBatchView<Scalar> x, BatchView<Scalar> y) const;
  void denseBackwardParameters(const Dense& dense, ConstBatchView<Scalar> x,
                               ConstBatchView<Scalar> dy) const;
  ConstWeightView<Scalar> weight(const Dense& dense) const;
  // rows × (the last batch's positions) of `workspace`: what forward kept, or backward scratch.
  BatchView<Scalar> stored(Workspace<Scalar>& workspace, Index rows) const;
  void backwardMlp(ConstBatchView<Scalar> dy);
  void backwardAttention();

  AttentionShape shape_;
  Index layers_;
  Index ln1_, ln2_;  // offsets of the LayerNorms' weight (bias follows)
  Dense attn_, attnProj_, fc_, mlpProj_;
  std::shared_ptr<BlockScratch<Scalar>> scratch_;

  // What forward keeps for backward, for the last batch of `columns_` positions.
  Index columns_ = 0;
  Workspace<Scalar> ln1Out_, ln1Stats_, qkv_, attnOut_;
  Workspace<Scalar> x2_, ln2Out_, ln2Stats_, fcOut_, geluOut_;
};

extern template class TransformerBlock<float>;
extern template class TransformerBlock<double>;

}  // namespace ringtrain::models
