// The layers of a GPT-2 model around its blocks (transformer_block.h): the token and position
// embeddings, layer normalisation and the output head tied to the token embedding.
//
// A sequence is one sample: T token ids in, C×T activations (channels-last, {C, T, 1}: one
// column of C values per position), and V×T logits out. Token ids arrive as Scalar values (the
// batch contract with data/: exact below 2^24).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/layer.h"

namespace ringtrain::models {

// Normal(0, 0.02): GPT-2's initialisation of its weight matrices and embeddings.
inline constexpr double kGptInitStddev = 0.02;

// "wte": y[:, n] = weight[id_n] for token id_n. Parameters: weight {V, C}. Throws
// std::invalid_argument naming the position for an id outside [0, V).
template <class Scalar>
class TokenEmbedding final : public Layer<Scalar> {
 public:
  TokenEmbedding(std::string name, Index vocabulary, Index width, Index context);
  std::string_view kind() const override { return "token_embedding"; }
  std::vector<ParameterShape> parameterShapes() const override;
  void initialize(SplitMix64& generator) override;
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  // Token ids have no gradient: throws std::logic_error (the model never asks the first layer).
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

 private:
  Index vocabulary_;
  Index width_;
};

// "wpe": y = x + weight[t] at position t of every sequence. Parameters: weight {T, C}.
template <class Scalar>
class PositionEmbedding final : public Layer<Scalar> {
 public:
  PositionEmbedding(std::string name, Index width, Index context);
  std::string_view kind() const override { return "position_embedding"; }
  std::vector<ParameterShape> parameterShapes() const override;
  void initialize(SplitMix64& generator) override;
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;
};

// "ln_f": layer normalisation of every position's C values. Parameters: weight {C} (starts at
// 1), bias {C} (starts at 0).
template <class Scalar>
class LayerNorm final : public Layer<Scalar> {
 public:
  LayerNorm(std::string name, Index width, Index context);
  std::string_view kind() const override { return "layer_norm"; }
  std::vector<ParameterShape> parameterShapes() const override;
  void initialize(SplitMix64& generator) override;
  void reserve(Index batch) override;
  void listWorkspaces(HeldMemoryList& held) const override { held.push_back(statistics_.held()); }
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

 private:
  Index width_;
  Workspace<Scalar> statistics_;  // per position: mean, then 1/standard deviation
};

// "lm_head": logits = W x at every position, W the tied {V, C} tensor (e.g. "wte.weight").
template <class Scalar>
class TiedOutputHead final : public Layer<Scalar> {
 public:
  TiedOutputHead(std::string name, std::string tiedTo, Index vocabulary, Index width,
                 Index context);
  std::string_view kind() const override { return "tied_output_head"; }
  std::optional<ParameterShape> tiedParameter() const override;
  double forwardFlopsPerSample() const override;
  bool backwardReadsOutput() const override { return false; }
  void forward(ConstBatchView<Scalar> x, BatchView<Scalar> y) override;
  void backwardParameters(ConstBatchView<Scalar> x, ConstBatchView<Scalar> dy) override;
  void backwardInput(ConstBatchView<Scalar> x, ConstBatchView<Scalar> y, ConstBatchView<Scalar> dy,
                     BatchView<Scalar> dx) override;

 private:
  std::string tiedTo_;
  Index vocabulary_;
  Index width_;
};

extern template class TokenEmbedding<float>;
extern template class TokenEmbedding<double>;
extern template class PositionEmbedding<float>;
extern template class PositionEmbedding<double>;
extern template class LayerNorm<float>;
extern template class LayerNorm<double>;
extern template class TiedOutputHead<float>;
extern template class TiedOutputHead<double>;

}  // namespace ringtrain::models
