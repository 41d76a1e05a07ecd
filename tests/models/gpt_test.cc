// The GPT-2 model: every new layer and the whole model against central finite differences in
// float64 (tolerance in gradient_check.h), the tie of the output head to the token embedding,
// causality, the loss at initialisation, and the sizes and names of GPT-2 124M.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "models/gpt_layers.h"
#include "models/model_factory.h"
#include "models/transformer_block.h"
#include "models/transformer_kernels.h"
#include "tests/models/gradient_check.h"

namespace ringtrain::models {
namespace {

using test_support::compareGradients;
using test_support::kGradientTolerance;
using test_support::LayerHarness;
using test_support::numericGradient;

TEST(GptLayerGradientTest, LayerNormMatchesFiniteDifferences) {
  LayerNorm<double> layer("ln_f", 6, 3);
  LayerHarness harness(layer, 2, 61);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(GptLayerGradientTest, PositionEmbeddingMatchesFiniteDifferences) {
  PositionEmbedding<double> layer("wpe", 4, 3);
  LayerHarness harness(layer, 3, 62);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(GptLayerGradientTest, TransformerBlockMatchesFiniteDifferences) {
  TransformerBlock<double> layer("h.0", {.width = 8, .heads = 2, .context = 4}, 2,
                                 std::make_shared<BlockScratch<double>>());
  LayerHarness harness(layer, 2, 63);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(GptLayerGradientTest, TiedOutputHeadMatchesFiniteDifferences) {
  TiedOutputHead<double> layer("lm_head", "wte.weight", 7, 4, 3);
  LayerHarness harness(layer, 2, 64);
  const auto error = harness.check();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(GptLayerGradientTest, TokenEmbeddingMatchesFiniteDifferencesWithRepeatedTokens) {
  TokenEmbedding<double> layer("wte", 5, 3, 4);
  LayerHarness harness(layer, 2, 65);
  harness.input() = {0, 4, 2, 4, 1, 1, 3, 0};  // ids, repeated: their rows collect two columns
  const auto error = harness.checkParameters();
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(GptLayerTest, TokenEmbeddingRefusesAnIdOutsideTheVocabulary) {
  TokenEmbedding<double> layer("wte", 5, 3, 2);
  std::vector<double> parameters(15), gradients(15), ids{1, 5}, out(6);
  layer.bind(parameters.data(), gradients.data());
  EXPECT_THROW(
      layer.forward(ConstBatchView<double>(ids.data(), 2, 1), BatchView<double>(out.data(), 6, 1)),
      std::invalid_argument);
}

// float's GELU (its own tanh through the vector exponential, in chunks) against double's
// (Eigen's tanh) over the range GPT activations take and past tanh's saturation, a count that
// leaves a partial chunk, and NaN passed through.
TEST(GptLayerTest, FloatGeluMatchesDoubleAndSaturates) {
  std::vector<double> h;
  for (int i = 0; i < 1300; ++i)
    h.push_back(-12.0 + 24.0 * i / 1299.0);
  h.push_back(1e-30);
  h.push_back(std::nan(""));
  const auto count = static_cast<Index>(h.size());
  std::vector<double> dg(h.size()), g(h.size()), dh(h.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    dg[i] = 1.0 - 0.001 * static_cast<double>(i % 7);
  geluForward(h.data(), g.data(), count);
  geluBackward(h.data(), dg.data(), dh.data(), count);
  const std::vector<float> hf(h.begin(), h.end()), dgf(dg.begin(), dg.end());
  std::vector<float> gf(h.size()), dhf(h.size());
  geluForward(hf.data(), gf.data(), count);
  geluBackward(hf.data(), dgf.data(), dhf.data(), count);
  for (std::size_t i = 0; i + 1 < h.size(); ++i) {
    const double x = static_cast<double>(hf[i]);
    EXPECT_NEAR(gf[i], g[i], 2e-6 * (1 + std::abs(x))) << "GELU(" << x << ")";
    EXPECT_NEAR(dhf[i], dh[i], 2e-6 * (1 + x * x)) << "GELU'(" << x << ")";
  }
  EXPECT_EQ(gf[1299], 12.0f) << "saturated: tanh 1";
  EXPECT_EQ(gf[0], -0.0f) << "saturated: tanh -1";
  EXPECT_TRUE(std::isnan(gf.back()));
  EXPECT_TRUE(std::isnan(dhf.back()));
}

ModelSpec tinyGpt() {
  ModelSpec spec{.name = "gpt", .input = {1, 5, 1}};
  spec.gpt = {.layers = 2, .heads = 2, .width = 8, .context = 5, .vocabulary = 13};
  return spec;
}

struct TokenBatch {
  std::vector<double> tokens;
  std::vector<std::int32_t> next;
  Batch<double> batch() const { return {tokens, next, {}}; }
};

TokenBatch randomTokens(const GptShape& shape, Index samples, std::uint64_t seed) {
  SplitMix64 generator(seed);
  TokenBatch data;
  for (Index i = 0; i < samples * shape.context; ++i) {
    data.tokens.push_back(static_cast<double>(generator.next() % shape.vocabulary));
    data.next.push_back(static_cast<std::int32_t>(generator.next() % shape.vocabulary));
  }
  return data;
}

TEST(GptModelTest, EveryParameterMatchesFiniteDifferencesOfTheMeanTokenLoss) {
  auto model = makeModel<double>(tinyGpt());
  model.initialize(71);
  // Larger weights than GPT-2's 0.02 (and non-zero biases), so every path carries signal.
  SplitMix64 generator(72);
  for (double& p : model.parameters())
    p += generator.symmetric(0.3);
  const TokenBatch data = randomTokens(tinyGpt().gpt, 3, 73);
  model.forward(data.batch());
  model.backward();
  const std::vector<double> analytic(model.gradients().begin(), model.gradients().end());
  const auto numeric =
      numericGradient(model.parameters(), [&] { return model.forward(data.batch()).meanLoss(); });
  const auto error = compareGradients(analytic, numeric);
  EXPECT_LT(error.worst, kGradientTolerance) << error.describe();
}

TEST(GptModelTest, OutputHeadReadsTheTokenEmbeddingAndOwnsNoParameters) {
  auto model = makeModel<double>(tinyGpt());
  const ParameterEntry& wte = model.parameter("wte.weight");
  EXPECT_EQ(wte.shape, (std::vector<Index>{13, 8}));
  for (const ParameterEntry& entry : model.parameterTable())
    EXPECT_EQ(entry.name.rfind("lm_head", 0), std::string::npos) << entry.name;
  // Changing the embedding changes the logits: the head reads the same memory.
  model.initialize(74);
  const TokenBatch data = randomTokens(tinyGpt().gpt, 1, 75);
  const std::vector<double> before(model.infer(data.tokens).reshaped().begin(),
                                   model.infer(data.tokens).reshaped().end());
  model.parameters()[wte.offset + 3] += 0.5;
  const auto after = model.infer(data.tokens);
  EXPECT_NE(std::vector<double>(after.reshaped().begin(), after.reshaped().end()), before);
}

TEST(GptModelTest, APositionsLogitsDoNotDependOnLaterTokens) {
  auto model = makeModel<double>(tinyGpt());
  model.initialize(76);
  TokenBatch data = randomTokens(tinyGpt().gpt, 1, 77);
  const Matrix<double> before = model.infer(data.tokens);
  data.tokens[3] = std::fmod(data.tokens[3] + 1, 13);
  const Matrix<double> after = model.infer(data.tokens);
  const Index vocabulary = 13;
  EXPECT_EQ(before.topRows(3 * vocabulary), after.topRows(3 * vocabulary));
  EXPECT_NE(before.bottomRows(2 * vocabulary), after.bottomRows(2 * vocabulary));
}

TEST(GptModelTest, InitialLossIsCloseToUniformOverTheVocabulary) {
  ModelSpec spec = tinyGpt();
  spec.gpt.vocabulary = 1000;
  auto model = makeModel<float>(spec);
  model.initialize(78);
  TokenBatch data = randomTokens(spec.gpt, 4, 79);
  const std::vector<float> tokens(data.tokens.begin(), data.tokens.end());
  const BatchResult result = model.forward({tokens, data.next, {}});
  EXPECT_NEAR(result.meanLoss(), std::log(1000.0), 0.05);
  EXPECT_EQ(result.samples, 4);
  EXPECT_EQ(result.predictions, 4 * 5);
}

TEST(GptModelTest, Gpt2SmallHasItsPublishedParameterCount) {
  ModelSpec spec{.name = "gpt", .input = {1, 1024, 1}};
  spec.gpt = {.layers = 12, .heads = 12, .width = 768, .context = 1024, .vocabulary = 50257};
  EXPECT_EQ(parameterCount(spec), 124439808.0);
}

TEST(GptModelTest, ParameterNamesAreGpt2sAndTheCountMatchesTheEstimate) {
  const ModelSpec spec = tinyGpt();
  auto model = makeModel<float>(spec);
  EXPECT_EQ(static_cast<double>(model.parameterCount()), parameterCount(spec));
  const std::vector<std::string> names = {"wte.weight",
                                          "wpe.weight",
                                          "h.0.ln_1.weight",
                                          "h.0.ln_1.bias",
                                          "h.0.attn.c_attn.weight",
                                          "h.0.attn.c_attn.bias",
                                          "h.0.attn.c_proj.weight",
                                          "h.0.attn.c_proj.bias",
                                          "h.0.ln_2.weight",
                                          "h.0.ln_2.bias",
                                          "h.0.mlp.c_fc.weight",
                                          "h.0.mlp.c_fc.bias",
                                          "h.0.mlp.c_proj.weight",
                                          "h.0.mlp.c_proj.bias"};
  for (std::size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(model.parameterTable()[i].name, names[i]);
  EXPECT_EQ(model.parameterTable().back().name, "ln_f.bias");
  EXPECT_EQ(model.parameter("h.1.mlp.c_fc.weight").shape, (std::vector<Index>{32, 8}));
}

TEST(GptModelTest, RefusesAWidthThatIsNotAMultipleOfTheHeads) {
  ModelSpec spec = tinyGpt();
  spec.gpt.heads = 3;
  EXPECT_THROW(makeModel<float>(spec), std::invalid_argument);
}

}  // namespace
}  // namespace ringtrain::models
