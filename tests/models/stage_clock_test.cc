// The stage clock: off it records nothing; on, each scope's time is exclusive of the scopes
// inside it, bytes add up, taking the totals zeroes them, and a GPT step charges every stage.
#include "models/stage_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "models/model_factory.h"

namespace ringtrain::models {
namespace {

std::size_t at(Stage stage) {
  return static_cast<std::size_t>(stage);
}

void spin(std::chrono::milliseconds length) {
  const auto end = std::chrono::steady_clock::now() + length;
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Turns the clock on for one test and off again, with no totals left behind.
struct ClockOn {
  ClockOn() {
    takeStageTimes();
    enableStageClock(true);
  }
  ~ClockOn() {
    enableStageClock(false);
    takeStageTimes();
  }
};

TEST(StageClock, RecordsNothingWhenOff) {
  takeStageTimes();
  {
    const StageScope scope(Stage::kGelu, 100);
    spin(std::chrono::milliseconds(2));
  }
  const StageTimes times = takeStageTimes();
  for (std::size_t i = 0; i < kStageCount; ++i) {
    EXPECT_EQ(times.ns[i], 0) << i;
    EXPECT_EQ(times.bytes[i], 0) << i;
  }
}

TEST(StageClock, ANestedScopesTimeIsItsOwnNotTheOuters) {
  const ClockOn on;
  {
    const StageScope attention(Stage::kAttention, 10);
    spin(std::chrono::milliseconds(20));
    {
      const StageScope products(Stage::kProducts);
      spin(std::chrono::milliseconds(40));
    }
    spin(std::chrono::milliseconds(20));
  }
  { const StageScope attention(Stage::kAttention, 5); }
  const StageTimes times = takeStageTimes();
  const double attentionMs = static_cast<double>(times.ns[at(Stage::kAttention)]) / 1e6;
  const double productsMs = static_cast<double>(times.ns[at(Stage::kProducts)]) / 1e6;
  EXPECT_GE(attentionMs, 40);
  EXPECT_LT(attentionMs, 70) << "the products' 40 ms were charged to attention too";
  EXPECT_GE(productsMs, 40);
  EXPECT_LT(productsMs, 70);
  EXPECT_EQ(times.bytes[at(Stage::kAttention)], 15);
  EXPECT_EQ(takeStageTimes().ns[at(Stage::kAttention)], 0) << "taking the totals zeroes them";
}

TEST(StageClock, AGptStepChargesEveryStage) {
  ModelSpec spec{.name = "gpt", .input = {1, 8, 1}};
  spec.gpt = {.layers = 2, .heads = 2, .width = 16, .context = 8, .vocabulary = 50};
  Model<float> model = makeModel<float>(spec);
  model.initialize(3);
  std::vector<float> tokens;
  std::vector<std::int32_t> next;
  for (int i = 0; i < 2 * 8; ++i) {
    tokens.push_back(static_cast<float>(i * 7 % 50));
    next.push_back(i * 3 % 50);
  }
  const ClockOn on;
  model.forward({tokens, next, {}});
  model.backward();
  const StageTimes times = takeStageTimes();
  for (const auto& [stage, name] : kStageNames) {
    EXPECT_GT(times.ns[at(stage)], 0) << name;
    if (stage != Stage::kProducts) {
      EXPECT_GT(times.bytes[at(stage)], 0) << name;
    }
  }
  // Least bytes, worked out from the shapes: 2 layers' GELU over 16 tokens × 64, forward (read,
  // write) and backward (two reads, a write).
  EXPECT_EQ(times.bytes[at(Stage::kGelu)], 2 * (2 + 3) * 16 * 64 * 4);
}

}  // namespace
}  // namespace ringtrain::models
