// Model: the parameter table and the flat buffers, seeded initialisation, the order and timing of
// the gradient-ready callbacks, batch checks, evaluation, and the factory's errors.
#include <gtest/gtest.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "models/conv2d.h"
#include "models/flatten.h"
#include "models/flush_to_zero.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/model_factory.h"
#include "models/relu.h"
#include "models/softmax_cross_entropy.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

ModelSpec cnnSpec() {
  return {.name = "cnn", .input = {1, 28, 28}, .classes = 10, .hidden = {}};
}
ModelSpec mlpSpec() {
  return {.name = "mlp", .input = {1, 28, 28}, .classes = 10, .hidden = {512, 512}};
}

template <class Scalar>
Model<Scalar> initializedModel(const ModelSpec& spec, std::uint64_t seed) {
  auto model = makeModel<Scalar>(spec);
  model.initialize(seed);
  return model;
}

struct RandomBatch {
  std::vector<double> inputs;
  std::vector<std::int32_t> labels;

  Batch<double> view() const { return {inputs, labels, {}}; }
};

RandomBatch randomBatch(const Model<double>& model, Index samples, std::uint64_t seed) {
  RandomBatch batch;
  batch.inputs = test_support::uniformValues(
      static_cast<std::size_t>(model.inputShape().size() * samples), 0, 1, seed);
  SplitMix64 generator(seed + 100);
  for (Index b = 0; b < samples; ++b)
    batch.labels.push_back(static_cast<std::int32_t>(generator.next() % model.outputSize()));
  return batch;
}

TEST(ModelTest, CnnParameterTableNamesShapesAndOffsets) {
  const auto model = makeModel<float>(cnnSpec());
  const auto table = model.parameterTable();
  const std::vector<std::pair<std::string, std::vector<Index>>> expected{
      {"conv1.weight", {16, 5, 5, 1}},  {"conv1.bias", {16}},
      {"conv2.weight", {32, 5, 5, 16}}, {"conv2.bias", {32}},
      {"fc1.weight", {128, 1568}},      {"fc1.bias", {128}},
      {"fc2.weight", {10, 128}},        {"fc2.bias", {10}}};
  ASSERT_EQ(table.size(), expected.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(table[i].name, expected[i].first);
    EXPECT_EQ(table[i].shape, expected[i].second);
  }
  EXPECT_EQ(model.parameterCount(), 416u + 12832u + 200832u + 1290u);
  EXPECT_EQ(model.parameter("fc1.weight").layerIndex, 7);  // conv relu pool conv relu pool flatten
  EXPECT_THROW(model.parameter("fc3.weight"), std::out_of_range);
}

TEST(ModelTest, ParameterCountOfASpecIsWhatTheModelAllocates) {
  const std::vector<ModelSpec> specs = {
      {"linreg", {1, 1, 3}, 0, {}}, {"mlp", {1, 28, 28}, 10, {512, 256}},
      {"mlp", {3, 5, 7}, 4, {9}},   {"cnn", {1, 28, 28}, 10, {}},
      {"cnn", {3, 30, 17}, 5, {}},
  };
  for (const ModelSpec& spec : specs) {
    EXPECT_EQ(parameterCount(spec), static_cast<double>(makeModel<float>(spec).parameterCount()))
        << spec.name << " " << toString(spec.input);
  }
}

TEST(ModelTest, ParametersAreContiguousInForwardOrderWithoutGaps) {
  for (const ModelSpec& spec : {mlpSpec(), cnnSpec()}) {
    const auto model = makeModel<float>(spec);
    std::size_t offset = 0;
    int lastLayer = -1;
    for (const ParameterEntry& entry : model.parameterTable()) {
      EXPECT_EQ(entry.offset, offset) << entry.name;
      const auto product = std::accumulate(entry.shape.begin(), entry.shape.end(), Index{1},
                                           std::multiplies<Index>());
      EXPECT_EQ(entry.count, static_cast<std::size_t>(product)) << entry.name;
      EXPECT_GE(entry.layerIndex, lastLayer) << entry.name;
      lastLayer = entry.layerIndex;
      offset += entry.count;
    }
    EXPECT_EQ(offset, model.parameters().size());
    EXPECT_EQ(model.gradients().size(), model.parameters().size());
    // Each layer's slice covers exactly its own entries.
    std::size_t layerOffset = 0;
    for (const LayerParameters& layer : model.parameterLayers()) {
      EXPECT_EQ(layer.offset, layerOffset) << layer.name;
      std::size_t count = 0;
      for (const ParameterEntry& entry : model.parameterTable())
        if (entry.layerIndex == layer.layerIndex) count += entry.count;
      EXPECT_EQ(layer.count, count) << layer.name;
      EXPECT_EQ(model.layer(layer.layerIndex).name(), layer.name);
      layerOffset += layer.count;
    }
    EXPECT_EQ(layerOffset, model.parameterCount());
  }
}

TEST(ModelTest, DescribeListsEveryLayerAndParameter) {
  const auto model = makeModel<float>(mlpSpec());
  const std::string text = model.describe();
  EXPECT_NE(text.find("fc2.weight [512, 512] offset 401920 count 262144"), std::string::npos)
      << text;
  EXPECT_NE(text.find("relu2 relu"), std::string::npos) << text;
  auto other =
      makeModel<float>({.name = "mlp", .input = {1, 28, 28}, .classes = 10, .hidden = {512, 256}});
  EXPECT_NE(other.describe(), text);
}

TEST(ModelTest, SameSeedGivesTheSameBitsAndAnotherSeedDifferentWeights) {
  auto a = makeModel<float>(cnnSpec());
  auto b = makeModel<float>(cnnSpec());
  a.initialize(7);
  b.initialize(7);
  EXPECT_TRUE(std::equal(a.parameters().begin(), a.parameters().end(), b.parameters().begin()));
  b.initialize(8);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.parameterCount(); ++i)
    differing += a.parameters()[i] != b.parameters()[i];
  EXPECT_GT(differing, a.parameterCount() / 2);
}

// Sample variance of a parameter tensor against the scheme's 2/fanIn or 2/(fanIn + fanOut).
double variance(std::span<const float> values) {
  double sum = 0, squares = 0;
  for (const float v : values) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const auto n = static_cast<double>(values.size());
  return squares / n - (sum / n) * (sum / n);
}

TEST(ModelTest, HeBeforeReluXavierAtTheOutputAndZeroBiases) {
  auto model = makeModel<float>(mlpSpec());
  model.initialize(3);
  const auto tensor = [&](const char* name) {
    const ParameterEntry& e = model.parameter(name);
    return std::span<const float>(model.parameters().subspan(e.offset, e.count));
  };
  // He: variance 2/fanIn; Xavier: 2/(fanIn + fanOut). 200k+ samples: within 2%.
  EXPECT_NEAR(variance(tensor("fc1.weight")) / (2.0 / 784), 1.0, 0.02);
  EXPECT_NEAR(variance(tensor("fc2.weight")) / (2.0 / 512), 1.0, 0.02);
  EXPECT_NEAR(variance(tensor("fc3.weight")) / (2.0 / (512 + 10)), 1.0, 0.05);
  const double heBound = std::sqrt(6.0 / 784);
  for (const float w : tensor("fc1.weight"))
    ASSERT_LE(std::abs(w), heBound);
  for (const char* bias : {"fc1.bias", "fc2.bias", "fc3.bias"})
    for (const float v : tensor(bias))
      ASSERT_EQ(v, 0.0f) << bias;
}

TEST(ModelTest, ConvolutionFanInCountsTheWholeField) {
  auto model = makeModel<float>(cnnSpec());
  model.initialize(5);
  const ParameterEntry& conv2 = model.parameter("conv2.weight");
  const auto weights =
      std::span<const float>(model.parameters().subspan(conv2.offset, conv2.count));
  EXPECT_NEAR(variance(weights) / (2.0 / (16 * 25)), 1.0, 0.05);
}

TEST(ModelTest, GradientsAreAnnouncedInReverseLayerOrderOnceTheyAreFinal) {
  auto model = makeModel<double>({.name = "cnn", .input = {1, 8, 8}, .classes = 3, .hidden = {}});
  model.initialize(1);
  const RandomBatch first = randomBatch(model, 4, 1);
  const RandomBatch second = randomBatch(model, 4, 2);
  model.forward(first.view());
  model.backward();  // leaves the first batch's gradients behind
  std::vector<int> order;
  std::vector<std::vector<double>> atAnnouncement;
  model.forward(second.view());
  model.backward([&](const LayerParameters& layer) {
    order.push_back(layer.layerIndex);
    const auto g = model.gradients().subspan(layer.offset, layer.count);
    atAnnouncement.emplace_back(g.begin(), g.end());
  });
  std::vector<int> expected;
  for (auto it = model.parameterLayers().rbegin(); it != model.parameterLayers().rend(); ++it)
    expected.push_back(it->layerIndex);
  EXPECT_EQ(order, expected);
  // What a reducer would have sent at each announcement is what backward finally left there.
  for (std::size_t k = 0; k < order.size(); ++k) {
    const LayerParameters& layer = model.parameterLayers()[order.size() - 1 - k];
    const auto final = model.gradients().subspan(layer.offset, layer.count);
    EXPECT_TRUE(std::equal(final.begin(), final.end(), atAnnouncement[k].begin())) << layer.name;
  }
}

// placeGradients (the shared-memory exchange keeps the gradients in its window): the current
// gradients are copied there, backward then writes every gradient there (those of the model's
// own buffer, to rounding), and a storage of the wrong size is refused.
TEST(ModelTest, PlacedGradientsAreCopiedAndWrittenWhereTheyLie) {
  auto model =
      makeModel<double>({.name = "mlp", .input = {1, 28, 28}, .classes = 10, .hidden = {512, 64}});
  model.initialize(3);
  const RandomBatch batch = randomBatch(model, 16, 4);
  model.forward(batch.view());
  model.backward();
  const std::vector<double> whole(model.gradients().begin(), model.gradients().end());

  std::vector<double> placed(model.parameterCount(), -1.0);
  model.placeGradients(placed);
  EXPECT_EQ(model.gradients().data(), placed.data());
  EXPECT_EQ(placed, whole) << "copied when placed";
  std::fill(placed.begin(), placed.end(),
            std::numeric_limits<double>::quiet_NaN());  // anything not written shows up
  model.forward(batch.view());
  model.backward();
  // The same products into memory of another alignment: BLAS may round them differently.
  double largest = 0;
  double worst = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    largest = std::max(largest, std::abs(whole[i]));
    const double difference = std::abs(whole[i] - placed[i]);
    worst = std::isnan(difference) ? std::numeric_limits<double>::infinity()
                                   : std::max(worst, difference);
  }
  EXPECT_LE(worst, 1e-12 * largest) << "a gradient not written where the model keeps them";

  std::vector<double> wrongSize(3);
  EXPECT_THROW(model.placeGradients(wrongSize), std::invalid_argument);
}

// The timeline's view of a step: every layer that computes something begins and ends its forward
// in order, then its backward in reverse order, and a layer's gradients are announced inside its
// own backward span. Evaluation is not observed.
TEST(ModelTest, LayerObserverSeesForwardInOrderAndBackwardInReverse) {
  auto model = makeModel<double>({.name = "cnn", .input = {1, 8, 8}, .classes = 3, .hidden = {}});
  model.initialize(1);
  const RandomBatch batch = randomBatch(model, 4, 1);
  std::vector<std::string> events;
  model.setLayerObserver([&](int layer, LayerPhase phase, bool begins) {
    events.push_back(std::string(phase == LayerPhase::kForward ? "f" : "b") + (begins ? "+" : "-") +
                     std::to_string(layer));
  });
  model.forward(batch.view());
  model.backward(
      [&](const LayerParameters& p) { events.push_back("g" + std::to_string(p.layerIndex)); });
  std::vector<std::string> expected;
  std::vector<int> computing;  // flatten shares its input's memory and does no work
  for (int i = 0; i < model.layerCount(); ++i) {
    if (!model.layer(i).outputIsInput()) computing.push_back(i);
  }
  for (const int i : computing) {
    expected.push_back("f+" + std::to_string(i));
    expected.push_back("f-" + std::to_string(i));
  }
  for (auto it = computing.rbegin(); it != computing.rend(); ++it) {
    expected.push_back("b+" + std::to_string(*it));
    if (model.layer(*it).parameterCount() > 0) expected.push_back("g" + std::to_string(*it));
    expected.push_back("b-" + std::to_string(*it));
  }
  EXPECT_EQ(events, expected);
  events.clear();
  model.evaluate(batch.view());
  EXPECT_TRUE(events.empty()) << "evaluation reported " << events.size() << " events";
}

TEST(ModelTest, FlopsCountTheEightProductsOfAThreeLayerMlp) {
  // Three forward products, three weight gradients, and input gradients for the two upper layers
  // only: nothing below the first layer needs one.
  const auto model = makeModel<float>(mlpSpec());
  const double forward = 2.0 * (784 * 512 + 512 * 512 + 512 * 10);
  EXPECT_DOUBLE_EQ(model.trainingFlopsPerSample(), 3 * forward - 2.0 * 784 * 512);
}

TEST(ModelTest, BackwardNeedsAFreshForward) {
  auto model = makeModel<double>({.name = "mlp", .input = {4, 1, 1}, .classes = 2, .hidden = {3}});
  EXPECT_THROW(model.backward(), std::logic_error);
  const RandomBatch batch = randomBatch(model, 2, 3);
  model.forward(batch.view());
  model.backward();
  EXPECT_THROW(model.backward(), std::logic_error);
  model.forward(batch.view());
  model.evaluate(batch.view());
  EXPECT_THROW(model.backward(), std::logic_error);
}

// A linear head's backward reads neither its outputs nor their memory: forward() has the loss
// write its gradient there (Model::outputs), and the model holds no second buffer of their size.
TEST(ModelTest, TheLossGradientLiesOverALinearHeadsOutputs) {
  auto model = initializedModel<double>(
      {.name = "mlp", .input = {4, 1, 1}, .classes = 1000, .hidden = {16}}, 5);
  const RandomBatch batch = randomBatch(model, 8, 6);
  const ConstBatchView<double> inferred = model.infer(batch.inputs);
  const std::vector<double> logits(inferred.data(), inferred.data() + inferred.size());
  ASSERT_NE(*std::min_element(logits.begin(), logits.end()),
            *std::max_element(logits.begin(), logits.end()));
  model.forward(batch.view());
  SoftmaxCrossEntropy<double> loss;
  loss.reserve(1000, 8);
  std::vector<double> gradient(logits.size());
  BatchView<double> want(gradient.data(), 1000, 8);
  loss.compute(ConstBatchView<double>(logits.data(), 1000, 8), {batch.labels, {}}, &want);
  const ConstBatchView<double> after = model.outputs();
  EXPECT_EQ(std::vector<double>(after.data(), after.data() + after.size()), gradient);
  EXPECT_LT(model.activationBytes(), 2 * logits.size() * sizeof(double));
}

TEST(ModelTest, BatchesThatDoNotMatchTheModelAreRejected) {
  auto model = makeModel<double>({.name = "mlp", .input = {4, 1, 1}, .classes = 2, .hidden = {3}});
  const std::vector<double> sevenValues(7, 0.5), eightValues(8, 0.5);
  const std::vector<std::int32_t> oneLabel{0}, twoLabels{0, 1}, badLabel{0, 2};
  EXPECT_THROW(model.forward({sevenValues, twoLabels, {}}), std::invalid_argument);
  EXPECT_THROW(model.forward({{}, {}, {}}), std::invalid_argument);
  EXPECT_THROW(model.forward({eightValues, oneLabel, {}}), std::invalid_argument);
  EXPECT_THROW(model.forward({eightValues, badLabel, {}}), std::invalid_argument);
  EXPECT_THROW(model.evaluate({eightValues, oneLabel, {}}), std::invalid_argument);
  auto regression = makeModel<double>({.name = "linreg", .input = {1, 1, 1}});
  const std::vector<double> twoInputs{1, 2}, oneTarget{1};
  EXPECT_THROW(regression.forward({twoInputs, {}, oneTarget}), std::invalid_argument);
}

TEST(ModelTest, EvaluateInChunksAddsUpToOneWholeBatch) {
  auto model = makeModel<double>({.name = "cnn", .input = {1, 8, 8}, .classes = 4, .hidden = {}});
  model.initialize(9);
  const RandomBatch batch = randomBatch(model, 11, 4);
  const BatchResult whole = model.forward(batch.view());
  auto chunked = makeModel<double>({.name = "cnn", .input = {1, 8, 8}, .classes = 4, .hidden = {}});
  chunked.initialize(9);
  chunked.reserve(3);  // 11 samples in chunks of 3, 3, 3 and 2
  const BatchResult parts = chunked.evaluate(batch.view());
  EXPECT_EQ(parts.samples, 11);
  EXPECT_EQ(parts.correct, whole.correct);
  EXPECT_NEAR(parts.lossSum, whole.lossSum, 1e-12 * std::abs(whole.lossSum));
  EXPECT_EQ(chunked.reservedBatch(), 3);
}

TEST(ModelTest, SmallerBatchAfterALargerOneGivesTheSameGradients) {
  const ModelSpec spec{.name = "cnn", .input = {2, 6, 6}, .classes = 3, .hidden = {}};
  auto used = initializedModel<double>(spec, 4);
  auto fresh = initializedModel<double>(spec, 4);
  const RandomBatch large = randomBatch(used, 9, 5);
  const RandomBatch small = randomBatch(used, 4, 6);
  used.forward(large.view());
  used.backward();
  used.forward(small.view());
  used.backward();
  fresh.forward(small.view());
  fresh.backward();
  for (std::size_t i = 0; i < used.parameterCount(); ++i)
    ASSERT_EQ(used.gradients()[i], fresh.gradients()[i]) << i;
}

// The cnn as written before its ReLUs moved after the pools: conv, ReLU, pool (twice), then the
// same head.
Model<double> cnnWithRelusBeforePools(const ModelSpec& spec) {
  std::vector<std::unique_ptr<Layer<double>>> layers;
  auto add = [&layers](auto layer) { layers.push_back(std::move(layer)); };
  auto top = [&layers] { return layers.back()->outputShape(); };
  Conv2dOptions conv{
      .outChannels = 16, .kernel = 5, .padding = 2, .inputLayout = ImageLayout::kChannelsFirst};
  add(std::make_unique<Conv2d<double>>("conv1", spec.input, conv));
  add(std::make_unique<Relu<double>>("relu1", top()));
  add(std::make_unique<MaxPool2d<double>>("pool1", top(), 2));
  conv.outChannels = 32;
  conv.inputLayout = ImageLayout::kChannelsLast;
  add(std::make_unique<Conv2d<double>>("conv2", top(), conv));
  add(std::make_unique<Relu<double>>("relu2", top()));
  add(std::make_unique<MaxPool2d<double>>("pool2", top(), 2));
  add(std::make_unique<Flatten<double>>("flatten", top()));
  add(std::make_unique<Linear<double>>("fc1", top().size(), 128, Initialization::kHe));
  add(std::make_unique<Relu<double>>("relu3", top()));
  add(std::make_unique<Linear<double>>("fc2", 128, spec.classes, Initialization::kXavier));
  return Model<double>("cnn", spec.input, std::move(layers),
                       std::make_unique<SoftmaxCrossEntropy<double>>());
}

TEST(ModelTest, CnnPoolingBeforeReluGivesTheLossAndGradientsOfReluBeforePooling) {
  const ModelSpec spec{.name = "cnn", .input = {1, 12, 12}, .classes = 10, .hidden = {}};
  auto pooledFirst = initializedModel<double>(spec, 8);
  auto reluFirst = cnnWithRelusBeforePools(spec);
  ASSERT_EQ(reluFirst.parameterCount(), pooledFirst.parameterCount());
  std::copy(pooledFirst.parameters().begin(), pooledFirst.parameters().end(),
            reluFirst.parameters().begin());
  // Inputs centred on 0: many windows are all negative after conv1, where ReLU's kink matters.
  RandomBatch batch = randomBatch(pooledFirst, 5, 9);
  for (double& v : batch.inputs)
    v -= 0.5;
  const BatchResult a = pooledFirst.forward(batch.view());
  pooledFirst.backward();
  const BatchResult b = reluFirst.forward(batch.view());
  reluFirst.backward();
  EXPECT_EQ(a.lossSum, b.lossSum);
  for (std::size_t i = 0; i < pooledFirst.parameterCount(); ++i)
    ASSERT_EQ(pooledFirst.gradients()[i], reluFirst.gradients()[i]) << i;
}

TEST(ModelTest, FloatAndDoubleModelsAgree) {
  const ModelSpec spec{.name = "cnn", .input = {1, 8, 8}, .classes = 5, .hidden = {}};
  auto single = initializedModel<float>(spec, 2);
  auto reference = initializedModel<double>(spec, 2);
  const RandomBatch batch = randomBatch(reference, 6, 7);
  const std::vector<float> inputs(batch.inputs.begin(), batch.inputs.end());
  const BatchResult a = single.forward({inputs, batch.labels, {}});
  single.backward();
  const BatchResult b = reference.forward(batch.view());
  reference.backward();
  EXPECT_NEAR(a.lossSum, b.lossSum, 1e-5 * std::abs(b.lossSum));
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < reference.parameterCount(); ++i) {
    worst = std::max(worst, std::abs(single.gradients()[i] - reference.gradients()[i]));
    scale = std::max(scale, std::abs(reference.gradients()[i]));
  }
  EXPECT_LT(worst, 1e-4 * scale);
}

TEST(ModelFactoryTest, UnknownNamesAndBadSizesThrowWithTheReason) {
  const auto message = [](const ModelSpec& spec) {
    try {
      makeModel<float>(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_EQ(message({.name = "resnet"}), "unknown model 'resnet' (known: linreg, mlp, cnn, gpt)");
  EXPECT_EQ(message({.name = "mlp", .classes = 1}), "model 'mlp': needs at least 2 classes, got 1");
  EXPECT_EQ(message({.name = "mlp", .hidden = {512, 0}}),
            "model 'mlp': hidden layer 2 has width 0; widths must be positive");
  EXPECT_EQ(message({.name = "mlp", .hidden = {}}), "model 'mlp': needs at least one hidden layer");
  EXPECT_EQ(message({.name = "cnn", .input = {1, 3, 28}}),
            "model 'cnn': needs images of at least 4x4 pixels, got 1x3x28");
  EXPECT_EQ(message({.name = "linreg", .input = {0, 1, 1}}),
            "model 'linreg': input shape 0x1x1 has an empty dimension");
}

TEST(ModelFactoryTest, EveryKnownNameBuildsAModel) {
  for (const std::string_view name : modelNames()) {
    ModelSpec spec{.name = std::string(name), .input = {1, 28, 28}};
    if (name == "gpt") spec.input = {1, spec.gpt.context, 1};  // a sequence of token ids
    const auto model = makeModel<float>(spec);
    EXPECT_EQ(model.name(), name);
    EXPECT_GT(model.parameterCount(), 0u);
  }
  EXPECT_EQ(makeModel<float>({.name = "linreg", .input = {1, 1, 1}}).parameterCount(), 2u);
}

TEST(FlushToZeroTest, DenormalsBecomeZeroOnThisThread) {
#if defined(__SSE__)
  const unsigned saved = _mm_getcsr();
  volatile float tiny = 1e-39f;  // a float denormal
  volatile float one = 1.0f;
  ASSERT_NE(tiny * one, 0.0f);
  EXPECT_TRUE(enableFlushToZero());
  EXPECT_TRUE(flushToZeroEnabled());
  EXPECT_EQ(tiny * one, 0.0f);
  _mm_setcsr(saved);
#else
  EXPECT_FALSE(enableFlushToZero());
  GTEST_SKIP() << "flush-to-zero is an x86 setting";
#endif
}

}  // namespace
}  // namespace ringtrain::models
