// ringtrain generate's pieces: drawing a token, and a GPT's sizes read back from a checkpoint.
#include "src/commands/generation.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace ringtrain::training {
namespace {

TEST(SampleToken, TemperatureZeroTakesTheMostLikelyToken) {
  models::SplitMix64 generator(1);
  const std::vector<float> logits = {0.1f, 2.5f, -1.0f, 2.4f};
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(commands::sampleToken(logits, 0, 0, generator), 1);
}

TEST(SampleToken, TopKDrawsOnlyFromTheKMostLikelyAndTheSameSeedRepeats) {
  const std::vector<float> logits = {3.0f, -2.0f, 2.9f, 0.0f, 2.8f, -5.0f};
  models::SplitMix64 generator(7);
  std::set<std::int32_t> seen;
  std::vector<std::int32_t> first;
  for (int i = 0; i < 300; ++i)
    first.push_back(commands::sampleToken(logits, 1.0, 3, generator));
  seen.insert(first.begin(), first.end());
  EXPECT_EQ(seen, (std::set<std::int32_t>{0, 2, 4}));  // all three drawn, nothing else
  models::SplitMix64 again(7);
  for (const std::int32_t token : first)
    EXPECT_EQ(commands::sampleToken(logits, 1.0, 3, again), token);
}

TEST(SampleToken, ALowTemperatureFavoursTheLargestLogit) {
  const std::vector<float> logits = {1.0f, 1.5f};
  models::SplitMix64 generator(3);
  int largest = 0;
  for (int i = 0; i < 1000; ++i)
    largest += commands::sampleToken(logits, 0.05, 0, generator) == 1;
  EXPECT_GT(largest, 990);  // e^(0.5/0.05) ≈ 22000 to 1
}

storage::CheckpointContent gptCheckpoint(const std::string& config) {
  storage::CheckpointContent saved;
  saved.config = config;
  saved.parameters = {{"wte.weight", {97, 16}, {}},  {"wpe.weight", {32, 16}, {}},
                      {"h.0.ln_1.weight", {16}, {}}, {"h.1.ln_1.weight", {16}, {}},
                      {"h.2.ln_1.weight", {16}, {}}, {"ln_f.weight", {16}, {}}};
  return saved;
}

TEST(GptShapeOf, SizesComeFromTheTensorsAndHeadsFromTheSavedConfiguration) {
  const models::GptShape shape =
      commands::gptShapeOf(gptCheckpoint("model = gpt\nheads = 4\nlayers = 3\n"), "ckpt.h5");
  EXPECT_EQ(shape, (models::GptShape{
                       .layers = 3, .heads = 4, .width = 16, .context = 32, .vocabulary = 97}));
}

TEST(GptShapeOf, ACheckpointOfAnotherModelIsRefusedNamingTheFile) {
  storage::CheckpointContent mlp;
  mlp.parameters = {{"fc1.weight", {4, 4}, {}}};
  try {
    commands::gptShapeOf(mlp, "mlp.h5");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "mlp.h5: no tensor wte.weight (not a GPT checkpoint?)");
  }
  EXPECT_THROW(commands::gptShapeOf(gptCheckpoint("model = gpt\n"), "x.h5"), std::runtime_error);
}

}  // namespace
}  // namespace ringtrain::training
