#include "models/transformer_block.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "models/gpt_layers.h"
#include "models/matrix_products.h"

namespace ringtrain::models {

template <class Scalar>
TransformerBlock<Scalar>::TransformerBlock(std::string name, const AttentionShape& shape,
                                           Index layers,
                                           std::shared_ptr<BlockScratch<Scalar>> scratch)
    : Layer<Scalar>(std::move(name), {shape.width, shape.context, 1},
                    {shape.width, shape.context, 1}),
      shape_(shape),
      layers_(layers),
      scratch_(std::move(scratch)) {
  const Index c = shape.width;
  if (c < 1 || shape.heads < 1 || c % shape.heads != 0 || shape.context < 1 || layers < 1)
    throw std::invalid_argument("block '" + this->name() + "': width " + std::to_string(c) +
                                " must be a positive multiple of the " +
                                std::to_string(shape.heads) + " heads");
  ln1_ = 0;
  attn_ = {2 * c, c, 3 * c};
  attnProj_ = {attn_.offset + 3 * c * c + 3 * c, c, c};
  ln2_ = attnProj_.offset + c * c + c;
  fc_ = {ln2_ + 2 * c, c, 4 * c};
  mlpProj_ = {fc_.offset + 4 * c * c + 4 * c, 4 * c, c};
}

template <class Scalar>
std::vector<ParameterShape> TransformerBlock<Scalar>::parameterShapes() const {
  const Index c = shape_.width;
  return {{"ln_1.weight", {c}},           {"ln_1.bias", {c}},
          {"attn.c_attn.weight", {3 * c, c}}, {"attn.c_attn.bias", {3 * c}},
          {"attn.c_proj.weight", {c, c}},     {"attn.c_proj.bias", {c}},
          {"ln_2.weight", {c}},           {"ln_2.bias", {c}},
          {"mlp.c_fc.weight", {4 * c, c}},    {"mlp.c_fc.bias", {4 * c}},
          {"mlp.c_proj.weight", {c, 4 * c}},  {"mlp.c_proj.bias", {c}}};
}

template <class Scalar>
void TransformerBlock<Scalar>::initialize(SplitMix64& generator) {
  Scalar* p = this->parameterData();
  const Index c = shape_.width;
  const double residual = kGptInitStddev / std::sqrt(2.0 * static_cast<double>(layers_));
  for (const Index ln : {ln1_, ln2_}) {
    std::fill_n(p + ln, c, Scalar(1));
    std::fill_n(p + ln + c, c, Scalar(0));
  }
  for (const Dense* dense : {&attn_, &attnProj_, &fc_, &mlpProj_}) {
    const bool projection = dense == &attnProj_ || dense == &mlpProj_;
    Scalar* w = p + dense->offset;
    fillNormal(std::span<Scalar>(w, dense->in * dense->out), projection ? residual : kGptInitStddev,
               generator);
    std::fill_n(w + dense->in * dense->out, dense->out, Scalar(0));
  }
}

template <class Scalar>
void TransformerBlock<Scalar>::reserve(Index batch) {
  const Index c = shape_.width;
  const Index n = shape_.context * batch;
  const Index t = shape_.context;
  for (auto [workspace, rows] : {std::pair{&ln1Out_, c}, {&attnOut_, c}, {&x2_, c}, {&ln2Out_, c},
                                 {&qkv_, 3 * c}, {&fcOut_, 4 * c}, {&geluOut_, 4 * c}})
    workspace->reserve(rows * n);
  ln1Stats_.reserve(2 * n);
  ln2Stats_.reserve(2 * n);
  scratch_->hidden.reserve(4 * c * n);
  scratch_->narrow.reserve(c * n);
  scratch_->residual.reserve(c * n);
  scratch_->qkv.reserve(3 * c * n);
  scratch_->scores.reserve(2 * t * t);
}

template <class Scalar>
void TransformerBlock<Scalar>::listWorkspaces(HeldMemoryList& held) const {
  const BlockScratch<Scalar>& scratch = *scratch_;
  for (const Workspace<Scalar>* w :
       {&ln1Out_, &ln1Stats_, &qkv_, &attnOut_, &x2_, &ln2Out_, &ln2Stats_, &fcOut_, &geluOut_,
        &scratch.hidden, &scratch.narrow, &scratch.residual, &scratch.qkv, &scratch.scores})
    held.push_back(w->held());
}

template <class Scalar>
double TransformerBlock<Scalar>::forwardFlopsPerSample() const {
  const auto c = static_cast<double>(shape_.width);
  const auto t = static_cast<double>(shape_.context);
  return 24 * t * c * c + 4 * t * t * c;
}

template <class Scalar>
ConstWeightView<Scalar> TransformerBlock<Scalar>::weight(const Dense& dense) const {
  return {this->parameterData() + dense.offset, dense.out, dense.in};
}

template <class Scalar>
BatchView<Scalar> TransformerBlock<Scalar>::stored(Workspace<Scalar>& workspace,
                                                   Index rows) const {
  return {workspace.reserve(rows * columns_), rows, columns_};
}

template <class Scalar>
void TransformerBlock<Scalar>::denseForward(const Dense& dense, ConstBatchView<Scalar> x,
                                            BatchView<Scalar> y) const {
  y.colwise() = VectorView<Scalar>(this->parameterData() + dense.offset + dense.in * dense.out,
                                   dense.out);
  product(y, weight(dense), x, /*accumulate=*/true);
}

template <class Scalar>
void TransformerBlock<Scalar>::denseBackwardParameters(const Dense& dense,
                                                       ConstBatchView<Scalar> x,
                                                       ConstBatchView<Scalar> dy) const {
  Scalar* g = this->gradientData() + dense.offset;
  product(WeightView<Scalar>(g, dense.out, dense.in), dy, x.transpose());
  VectorView<Scalar>(g + dense.in * dense.out, dense.out).noalias() = dy.rowwise().sum();
}

template <class Scalar>
void TransformerBlock<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const Index c = shape_.width;
  const Scalar* p = this->parameterData();
  columns_ = x.size() / c;
  const ConstBatchView<Scalar> in(x.data(), c, columns_);
  BatchView<Scalar> a1 = stored(ln1Out_, c);
  Scalar* s1 = ln1Stats_.reserve(2 * columns_);
  layerNormForward(in, p + ln1_, p + ln1_ + c, a1, s1, s1 + columns_);
  BatchView<Scalar> qkv = stored(qkv_, 3 * c);
  denseForward(attn_, asConst(a1), qkv);
  BatchView<Scalar> attended = stored(attnOut_, c);
  attentionForward(shape_, asConst(qkv), attended,
                   scratch_->scores.reserve(2 * shape_.context * shape_.context));
  BatchView<Scalar> x2 = stored(x2_, c);
  denseForward(attnProj_, asConst(attended), x2);
  x2 += in;
  BatchView<Scalar> a2 = stored(ln2Out_, c);
  Scalar* s2 = ln2Stats_.reserve(2 * columns_);
  layerNormForward(asConst(x2), p + ln2_, p + ln2_ + c, a2, s2, s2 + columns_);
  BatchView<Scalar> h = stored(fcOut_, 4 * c);
  denseForward(fc_, asConst(a2), h);
  BatchView<Scalar> g = stored(geluOut_, 4 * c);
  geluForward(h.data(), g.data(), h.size());
  BatchView<Scalar> out(y.data(), c, columns_);
  denseForward(mlpProj_, asConst(g), out);
  out += x2;
}

// From dy to d(x2) in scratch_->residual, with the MLP's and ln_2's parameter gradients.
template <class Scalar>
void TransformerBlock<Scalar>::backwardMlp(ConstBatchView<Scalar> dy) {
  const Index c = shape_.width;
  const ConstBatchView<Scalar> a2 = asConst(stored(ln2Out_, c));
  const ConstBatchView<Scalar> x2 = asConst(stored(x2_, c));
  denseBackwardParameters(mlpProj_, asConst(stored(geluOut_, 4 * c)), dy);
  BatchView<Scalar> dh = stored(scratch_->hidden, 4 * c);
  product(dh, weight(mlpProj_).transpose(), dy);
  geluBackward(fcOut_.data(), dh.data(), dh.data(), dh.size());
  denseBackwardParameters(fc_, a2, asConst(dh));
  BatchView<Scalar> da2 = stored(scratch_->narrow, c);
  product(da2, weight(fc_).transpose(), dh);
  const Scalar* s2 = ln2Stats_.data();
  Scalar* g = this->gradientData();
  layerNormBackwardParameters(x2, asConst(da2), s2, s2 + columns_, g + ln2_, g + ln2_ + c);
  BatchView<Scalar> dx2 = stored(scratch_->residual, c);
  dx2 = dy;
  layerNormBackwardInput(x2, asConst(da2), this->parameterData() + ln2_, s2, s2 + columns_, dx2,
                         /*accumulate=*/true);
}

// From d(x2) to d(ln_1 output) in scratch_->narrow, with the attention's parameter gradients.
template <class Scalar>
void TransformerBlock<Scalar>::backwardAttention() {
  const Index c = shape_.width;
  const ConstBatchView<Scalar> dx2 = asConst(stored(scratch_->residual, c));
  denseBackwardParameters(attnProj_, asConst(stored(attnOut_, c)), dx2);
  BatchView<Scalar> dAttended = stored(scratch_->narrow, c);
  product(dAttended, weight(attnProj_).transpose(), dx2);
  BatchView<Scalar> dqkv = stored(scratch_->qkv, 3 * c);
  attentionBackward(shape_, asConst(stored(qkv_, 3 * c)), asConst(dAttended), dqkv,
                    scratch_->scores.reserve(2 * shape_.context * shape_.context));
  denseBackwardParameters(attn_, asConst(stored(ln1Out_, c)), asConst(dqkv));
  BatchView<Scalar> da1 = stored(scratch_->narrow, c);
  product(da1, weight(attn_).transpose(), dqkv);
}

template <class Scalar>
void TransformerBlock<Scalar>::backwardParameters(ConstBatchView<Scalar> x,
                                                  ConstBatchView<Scalar> dy) {
  const Index c = shape_.width;
  backwardMlp(ConstBatchView<Scalar>(dy.data(), c, columns_));
  backwardAttention();
  const Scalar* s1 = ln1Stats_.data();
  Scalar* g = this->gradientData();
  layerNormBackwardParameters(ConstBatchView<Scalar>(x.data(), c, columns_),
                              asConst(stored(scratch_->narrow, c)), s1, s1 + columns_, g + ln1_,
                              g + ln1_ + c);
}

template <class Scalar>
void TransformerBlock<Scalar>::backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar>,
                                             ConstBatchView<Scalar>, BatchView<Scalar> dx) {
  const Index c = shape_.width;
  BatchView<Scalar> out(dx.data(), c, columns_);
  out = stored(scratch_->residual, c);
  const Scalar* s1 = ln1Stats_.data();
  layerNormBackwardInput(ConstBatchView<Scalar>(x.data(), c, columns_),
                         asConst(stored(scratch_->narrow, c)), this->parameterData() + ln1_, s1,
                         s1 + columns_, out, /*accumulate=*/true);
}

template class TransformerBlock<float>;
template class TransformerBlock<double>;

}  // namespace ringtrain::models
