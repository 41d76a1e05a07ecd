#include "models/model_factory.h"

#include <memory>
#include <stdexcept>
#include <utility>

#include "models/conv2d.h"
#include "models/flatten.h"
#include "models/gpt_layers.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/mean_squared_error.h"
#include "models/relu.h"
#include "models/softmax_cross_entropy.h"
#include "models/transformer_block.h"

namespace ringtrain::models {
namespace {

template <class Scalar>
using Layers = std::vector<std::unique_ptr<Layer<Scalar>>>;

[[noreturn]] void badSpec(const ModelSpec& spec, const std::string& reason) {
  throw std::invalid_argument("model '" + spec.name + "': " + reason);
}

void checkClasses(const ModelSpec& spec) {
  if (spec.classes < 2)
    badSpec(spec, "needs at least 2 classes, got " + std::to_string(spec.classes));
}

template <class Scalar>
Model<Scalar> makeLinearRegression(const ModelSpec& spec) {
  Layers<Scalar> layers;
  layers.push_back(
      std::make_unique<Linear<Scalar>>("linear", spec.input.size(), 1, Initialization::kXavier));
  return Model<Scalar>(spec.name, spec.input, std::move(layers),
                       std::make_unique<MeanSquaredError<Scalar>>());
}

template <class Scalar>
Model<Scalar> makeMlp(const ModelSpec& spec) {
  checkClasses(spec);
  if (spec.hidden.empty()) badSpec(spec, "needs at least one hidden layer");
  Layers<Scalar> layers;
  Index width = spec.input.size();
  for (std::size_t i = 0; i < spec.hidden.size(); ++i) {
    if (spec.hidden[i] < 1)
      badSpec(spec, "hidden layer " + std::to_string(i + 1) + " has width " +
                        std::to_string(spec.hidden[i]) + "; widths must be positive");
    const std::string number = std::to_string(i + 1);
    layers.push_back(std::make_unique<Linear<Scalar>>("fc" + number, width, spec.hidden[i],
                                                      Initialization::kHe));
    layers.push_back(std::make_unique<Relu<Scalar>>("relu" + number, layers.back()->outputShape()));
    width = spec.hidden[i];
  }
  layers.push_back(std::make_unique<Linear<Scalar>>("fc" + std::to_string(spec.hidden.size() + 1),
                                                    width, spec.classes, Initialization::kXavier));
  return Model<Scalar>(spec.name, spec.input, std::move(layers),
                       std::make_unique<SoftmaxCrossEntropy<Scalar>>());
}

// Why this size: a LeNet-style network large enough to clear the 97% target on the
// 10,000-digit MNIST sample in a few epochs, and small enough (~215k parameters, ~6 MFLOP
// per sample forward) for a CPU rank to train an epoch of 8,000 digits in seconds. "Same"
// padding keeps 28x28 through the 5x5 kernels so both pools halve exactly (28 -> 14 -> 7);
// conv2, which does most of the work, has 32 channels: two AVX-512 vectors of floats per pixel.
// Each ReLU follows its pool: max and ReLU commute (both keep order), so outputs and gradients
// are those of ReLU then pool, for a quarter of the ReLU's work.
template <class Scalar>
Model<Scalar> makeCnn(const ModelSpec& spec) {
  checkClasses(spec);
  if (spec.input.height < 4 || spec.input.width < 4)
    badSpec(spec, "needs images of at least 4x4 pixels, got " + toString(spec.input));
  Layers<Scalar> layers;
  auto add = [&layers](auto layer) { layers.push_back(std::move(layer)); };
  auto top = [&layers] { return layers.back()->outputShape(); };
  Conv2dOptions conv{.outChannels = 16,
                     .kernel = 5,
                     .stride = 1,
                     .padding = 2,
                     .inputLayout = ImageLayout::kChannelsFirst,
                     .init = Initialization::kHe};
  add(std::make_unique<Conv2d<Scalar>>("conv1", spec.input, conv));
  add(std::make_unique<MaxPool2d<Scalar>>("pool1", top(), 2));
  add(std::make_unique<Relu<Scalar>>("relu1", top()));
  conv.outChannels = 32;
  conv.inputLayout = ImageLayout::kChannelsLast;
  add(std::make_unique<Conv2d<Scalar>>("conv2", top(), conv));
  add(std::make_unique<MaxPool2d<Scalar>>("pool2", top(), 2));
  add(std::make_unique<Relu<Scalar>>("relu2", top()));
  add(std::make_unique<Flatten<Scalar>>("flatten", top()));
  add(std::make_unique<Linear<Scalar>>("fc1", top().size(), 128, Initialization::kHe));
  add(std::make_unique<Relu<Scalar>>("relu3", top()));
  add(std::make_unique<Linear<Scalar>>("fc2", 128, spec.classes, Initialization::kXavier));
  return Model<Scalar>(spec.name, spec.input, std::move(layers),
                       std::make_unique<SoftmaxCrossEntropy<Scalar>>());
}

void checkGpt(const ModelSpec& spec) {
  const GptShape& g = spec.gpt;
  if (g.layers < 1 || g.heads < 1 || g.context < 1 || g.vocabulary < 2 || g.width < 1)
    badSpec(spec, "layers, heads, width and context must be positive and the vocabulary at least 2");
  if (g.width % g.heads != 0)
    badSpec(spec, "width " + std::to_string(g.width) + " is not a multiple of the " +
                      std::to_string(g.heads) + " heads");
  if (g.vocabulary >= (Index{1} << 24))
    badSpec(spec, "a vocabulary of " + std::to_string(g.vocabulary) +
                      " ids is not exact in float32 (at most 2^24)");
  if (spec.input != SampleShape{1, g.context, 1})
    badSpec(spec, "takes sequences of " + std::to_string(g.context) + " token ids, not " +
                      toString(spec.input));
}

template <class Scalar>
Model<Scalar> makeGpt(const ModelSpec& spec) {
  checkGpt(spec);
  const GptShape& g = spec.gpt;
  Layers<Scalar> layers;
  layers.push_back(std::make_unique<TokenEmbedding<Scalar>>("wte", g.vocabulary, g.width, g.context));
  layers.push_back(std::make_unique<PositionEmbedding<Scalar>>("wpe", g.width, g.context));
  const auto scratch = std::make_shared<BlockScratch<Scalar>>();
  const AttentionShape attention{g.width, g.heads, g.context};
  for (Index i = 0; i < g.layers; ++i) {
    layers.push_back(std::make_unique<TransformerBlock<Scalar>>("h." + std::to_string(i),
                                                                attention, g.layers, scratch));
  }
  layers.push_back(std::make_unique<LayerNorm<Scalar>>("ln_f", g.width, g.context));
  layers.push_back(std::make_unique<TiedOutputHead<Scalar>>("lm_head", "wte.weight", g.vocabulary,
                                                            g.width, g.context));
  return Model<Scalar>(spec.name, spec.input, std::move(layers),
                       std::make_unique<SoftmaxCrossEntropy<Scalar>>());
}

}  // namespace

std::vector<std::string_view> modelNames() {
  return {"linreg", "mlp", "cnn", "gpt"};
}

template <class Scalar>
Model<Scalar> makeModel(const ModelSpec& spec) {
  if (spec.input.channels < 1 || spec.input.height < 1 || spec.input.width < 1)
    badSpec(spec, "input shape " + toString(spec.input) + " has an empty dimension");
  if (spec.name == "linreg") return makeLinearRegression<Scalar>(spec);
  if (spec.name == "mlp") return makeMlp<Scalar>(spec);
  if (spec.name == "cnn") return makeCnn<Scalar>(spec);
  if (spec.name == "gpt") return makeGpt<Scalar>(spec);
  throw std::invalid_argument("unknown model '" + spec.name + "' (known: linreg, mlp, cnn, gpt)");
}

double parameterCount(const ModelSpec& spec) {
  // A dense layer from `in` to `out` values: weights and biases.
  const auto dense = [](double in, double out) { return in * out + out; };
  if (spec.name == "linreg") return dense(static_cast<double>(spec.input.size()), 1);
  if (spec.name == "gpt") {
    const auto c = static_cast<double>(spec.gpt.width);
    const double block = 12 * c * c + 13 * c;
    return static_cast<double>(spec.gpt.vocabulary + spec.gpt.context) * c +
           static_cast<double>(spec.gpt.layers) * block + 2 * c;
  }
  if (spec.name == "cnn") {
    const double conv1 = dense(static_cast<double>(spec.input.channels) * 25, 16);
    const double conv2 = dense(16.0 * 25, 32);
    const double flat = 32.0 * static_cast<double>(spec.input.height / 4 * (spec.input.width / 4));
    return conv1 + conv2 + dense(flat, 128) + dense(128, static_cast<double>(spec.classes));
  }
  double count = 0;
  double width = static_cast<double>(spec.input.size());
  for (const Index hidden : spec.hidden) {
    count += dense(width, static_cast<double>(hidden));
    width = static_cast<double>(hidden);
  }
  return count + dense(width, static_cast<double>(spec.classes));
}

template Model<float> makeModel<float>(const ModelSpec&);
template Model<double> makeModel<double>(const ModelSpec&);

}  // namespace ringtrain::models
