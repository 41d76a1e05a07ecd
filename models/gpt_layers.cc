#include "models/gpt_layers.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "models/matrix_products.h"
#include "models/stage_clock.h"
#include "models/transformer_kernels.h"

namespace ringtrain::models {
namespace {

// A batch of sequences seen as one column per position: width × (positions · B).
template <class Scalar>
ConstBatchView<Scalar> columns(ConstBatchView<Scalar> x, Index width) {
  return {x.data(), width, x.size() / width};
}
template <class Scalar>
BatchView<Scalar> columns(BatchView<Scalar> x, Index width) {
  return {x.data(), width, x.size() / width};
}

}  // namespace

template <class Scalar>
TokenEmbedding<Scalar>::TokenEmbedding(std::string name, Index vocabulary, Index width,
                                       Index context)
    : Layer<Scalar>(std::move(name), {1, context, 1}, {width, context, 1}),
      vocabulary_(vocabulary),
      width_(width) {}

template <class Scalar>
std::vector<ParameterShape> TokenEmbedding<Scalar>::parameterShapes() const {
  return {{"weight", {vocabulary_, width_}}};
}

template <class Scalar>
void TokenEmbedding<Scalar>::initialize(SplitMix64& generator) {
  fillNormal(std::span<Scalar>(this->parameterData(), vocabulary_ * width_), kGptInitStddev,
             generator);
}

template <class Scalar>
void TokenEmbedding<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const StageScope stage(Stage::kEmbedding, bytesOf<Scalar>(x.size() * (1 + 2 * width_)));
  BatchView<Scalar> out = columns(y, width_);
  for (Index n = 0; n < x.size(); ++n) {
    const Scalar id = x.data()[n];
    if (!(id >= 0 && id < static_cast<Scalar>(vocabulary_)) || id != std::floor(id))
      throw std::invalid_argument("layer '" + this->name() + "': token " +
                                  std::to_string(static_cast<double>(id)) + " at position " +
                                  std::to_string(n) + " is not an id in [0, " +
                                  std::to_string(vocabulary_) + ")");
    out.col(n) =
        VectorView<Scalar>(this->parameterData() + static_cast<Index>(id) * width_, width_);
  }
}

template <class Scalar>
void TokenEmbedding<Scalar>::backwardParameters(ConstBatchView<Scalar> x,
                                                ConstBatchView<Scalar> dy) {
  // The whole table zeroed, then each token's row read, added to and written.
  const StageScope stage(Stage::kEmbedding,
                         bytesOf<Scalar>(vocabulary_ * width_ + 3 * x.size() * width_));
  std::fill_n(this->gradientData(), vocabulary_ * width_, Scalar(0));
  const ConstBatchView<Scalar> d = columns(dy, width_);
  for (Index n = 0; n < x.size(); ++n) {
    const auto id = static_cast<Index>(x.data()[n]);
    VectorView<Scalar>(this->gradientData() + id * width_, width_) += d.col(n);
  }
}

template <class Scalar>
void TokenEmbedding<Scalar>::backwardInput(ConstBatchView<Scalar>, ConstBatchView<Scalar>,
                                           ConstBatchView<Scalar>, BatchView<Scalar>) {
  throw std::logic_error("layer '" + this->name() + "': token ids have no gradient");
}

template <class Scalar>
PositionEmbedding<Scalar>::PositionEmbedding(std::string name, Index width, Index context)
    : Layer<Scalar>(std::move(name), {width, context, 1}, {width, context, 1}) {}

template <class Scalar>
std::vector<ParameterShape> PositionEmbedding<Scalar>::parameterShapes() const {
  return {{"weight", {this->inputShape().height, this->inputShape().channels}}};
}

template <class Scalar>
void PositionEmbedding<Scalar>::initialize(SplitMix64& generator) {
  fillNormal(std::span<Scalar>(this->parameterData(), this->inputShape().size()), kGptInitStddev,
             generator);
}

// A sequence's C×T block and the {T, C} row-major weight have the same layout, so a position
// embedding is one column of size C·T added to every sample.
template <class Scalar>
void PositionEmbedding<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const StageScope stage(Stage::kEmbedding, bytesOf<Scalar>(2 * x.size() + x.rows()));
  const VectorView<Scalar> weight(this->parameterData(), x.rows());
  y.noalias() = x.colwise() + weight;
}

template <class Scalar>
void PositionEmbedding<Scalar>::backwardParameters(ConstBatchView<Scalar>,
                                                   ConstBatchView<Scalar> dy) {
  const StageScope stage(Stage::kEmbedding, bytesOf<Scalar>(dy.size() + dy.rows()));
  VectorView<Scalar>(this->gradientData(), dy.rows()).noalias() = dy.rowwise().sum();
}

template <class Scalar>
void PositionEmbedding<Scalar>::backwardInput(ConstBatchView<Scalar>, ConstBatchView<Scalar>,
                                              ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  const StageScope stage(Stage::kEmbedding, bytesOf<Scalar>(2 * dy.size()));
  dx = dy;
}

template <class Scalar>
LayerNorm<Scalar>::LayerNorm(std::string name, Index width, Index context)
    : Layer<Scalar>(std::move(name), {width, context, 1}, {width, context, 1}), width_(width) {}

template <class Scalar>
std::vector<ParameterShape> LayerNorm<Scalar>::parameterShapes() const {
  return {{"weight", {width_}}, {"bias", {width_}}};
}

template <class Scalar>
void LayerNorm<Scalar>::initialize(SplitMix64&) {
  std::fill_n(this->parameterData(), width_, Scalar(1));
  std::fill_n(this->parameterData() + width_, width_, Scalar(0));
}

template <class Scalar>
void LayerNorm<Scalar>::reserve(Index batch) {
  statistics_.reserve(2 * this->inputShape().height * batch);
}

template <class Scalar>
void LayerNorm<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const ConstBatchView<Scalar> in = columns(x, width_);
  Scalar* mean = statistics_.reserve(2 * in.cols());
  layerNormForward(in, this->parameterData(), this->parameterData() + width_, columns(y, width_),
                   mean, mean + in.cols());
}

template <class Scalar>
void LayerNorm<Scalar>::backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) {
  const ConstBatchView<Scalar> in = columns(x, width_);
  const Scalar* mean = statistics_.data();
  layerNormBackwardParameters(in, columns(dy, width_), mean, mean + in.cols(), this->gradientData(),
                              this->gradientData() + width_);
}

template <class Scalar>
void LayerNorm<Scalar>::backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar>,
                                      ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  const ConstBatchView<Scalar> in = columns(x, width_);
  const Scalar* mean = statistics_.data();
  layerNormBackwardInput(in, columns(dy, width_), this->parameterData(), mean, mean + in.cols(),
                         columns(dx, width_), /*accumulate=*/false);
}

template <class Scalar>
TiedOutputHead<Scalar>::TiedOutputHead(std::string name, std::string tiedTo, Index vocabulary,
                                       Index width, Index context)
    : Layer<Scalar>(std::move(name), {width, context, 1}, {vocabulary, context, 1}),
      tiedTo_(std::move(tiedTo)),
      vocabulary_(vocabulary),
      width_(width) {}

template <class Scalar>
std::optional<ParameterShape> TiedOutputHead<Scalar>::tiedParameter() const {
  return ParameterShape{tiedTo_, {vocabulary_, width_}};
}

template <class Scalar>
double TiedOutputHead<Scalar>::forwardFlopsPerSample() const {
  return 2.0 * static_cast<double>(vocabulary_ * width_ * this->inputShape().height);
}

template <class Scalar>
void TiedOutputHead<Scalar>::forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) {
  const ConstWeightView<Scalar> weight(this->parameterData(), vocabulary_, width_);
  product(columns(y, vocabulary_), weight, columns(x, width_));
}

template <class Scalar>
void TiedOutputHead<Scalar>::backwardParameters(ConstBatchView<Scalar> x,
                                                ConstBatchView<Scalar> dy) {
  product(WeightView<Scalar>(this->gradientData(), vocabulary_, width_), columns(dy, vocabulary_),
          columns(x, width_).transpose());
}

template <class Scalar>
void TiedOutputHead<Scalar>::backwardInput(ConstBatchView<Scalar>, ConstBatchView<Scalar>,
                                           ConstBatchView<Scalar> dy, BatchView<Scalar> dx) {
  const ConstWeightView<Scalar> weight(this->parameterData(), vocabulary_, width_);
  product(columns(dx, width_), weight.transpose(), columns(dy, vocabulary_));
}

template class TokenEmbedding<float>;
template class TokenEmbedding<double>;
template class PositionEmbedding<float>;
template class PositionEmbedding<double>;
template class LayerNorm<float>;
template class LayerNorm<double>;
template class TiedOutputHead<float>;
template class TiedOutputHead<double>;

}  // namespace ringtrain::models
