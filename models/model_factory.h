// The models ringtrain trains, by name: linreg, mlp, cnn and gpt.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"

namespace ringtrain::models {

// A GPT-2-architecture language model's sizes (gpt-mini: 4, 4, 256, 128, 50257; GPT-2 124M:
// 12, 12, 768, 1024, 50257).
struct GptShape {
  Index layers = 4;
  Index heads = 4;
  Index width = 256;  // C, a multiple of heads
  Index context = 128;
  Index vocabulary = 50257;
  friend bool operator==(const GptShape&, const GptShape&) = default;
};

struct ModelSpec {
  std::string name;                     // "linreg", "mlp", "cnn" or "gpt"
  SampleShape input{1, 28, 28};         // one sample, channels-first as data/ delivers it
  Index classes = 10;                   // mlp and cnn
  std::vector<Index> hidden{512, 512};  // mlp: widths of the hidden layers, input side first
  GptShape gpt{};                       // gpt (its input is {1, context, 1} token ids)
};

// "linreg", "mlp", "cnn".
std::vector<std::string_view> modelNames();

// Builds the model a spec names, parameters zero (call initialize(seed)):
//   linreg  one dense layer from input.size() values to one output, mean squared error; the
//           regression targets are float values, one per sample.
//   mlp     dense layers through `hidden` with ReLU between, then `classes` logits; softmax
//           cross-entropy on int32 labels. He initialisation before a ReLU, Xavier for the last.
//   cnn     conv1 5x5 C->16 pad 2, ReLU, 2x2 max-pool; conv2 5x5 16->32 pad 2, ReLU, 2x2
//           max-pool; fc1 32·(H/4)·(W/4)->128, ReLU; fc2 128->classes; softmax cross-entropy.
//           `hidden` is not used. Needs H and W of at least 4.
//   gpt     GPT-2: wte, wpe, blocks h.0 ... h.{L-1} (transformer_block.h), ln_f, and lm_head
//           tied to wte.weight; softmax cross-entropy on the next token at every position
//           (T int32 labels per sample). `input` must be {1, context, 1}.
// Throws std::invalid_argument with a one-line reason for an unknown name or a bad size.
template <class Scalar>
Model<Scalar> makeModel(const ModelSpec& spec);

// The number of parameters makeModel(spec) allocates, computed without allocating them, so that a
// model too large for the machine can be refused first. A double: sizes too large for any
// machine must not wrap around. The spec must be one makeModel accepts.
double parameterCount(const ModelSpec& spec);

extern template Model<float> makeModel<float>(const ModelSpec&);
extern template Model<double> makeModel<double>(const ModelSpec&);

}  // namespace ringtrain::models
