// The models ringtrain trains, by name: linreg, mlp and cnn.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"

namespace ringtrain::models {

struct ModelSpec {
  std::string name;                     // "linreg", "mlp" or "cnn"
  SampleShape input{1, 28, 28};         // one sample, channels-first as data/ delivers it
  Index classes = 10;                   // mlp and cnn
  std::vector<Index> hidden{512, 512};  // mlp: widths of the hidden layers, input side first
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
