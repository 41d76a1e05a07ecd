// Where a model step's time goes: the products against the kernels between them (issue 45).
// Off by default; a benchmark turns it on, runs steps, and takes this thread's totals. Each
// stage's time is exclusive: a product inside attention counts as a product, not as attention.
// Off, a scope costs one relaxed atomic load.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>

#include "base/named_values.h"

namespace ringtrain::models {

enum class Stage { kProducts, kAttention, kLayerNorm, kGelu, kEmbedding, kLoss };
inline constexpr NamedValue<Stage> kStageNames[] = {
    {Stage::kProducts, "products"},    {Stage::kAttention, "attention (mask, softmax)"},
    {Stage::kLayerNorm, "layer norm"}, {Stage::kGelu, "GELU"},
    {Stage::kEmbedding, "embeddings"}, {Stage::kLoss, "loss (softmax, cross-entropy)"}};
inline constexpr std::size_t kStageCount = std::size(kStageNames);

struct StageTimes {
  std::array<std::int64_t, kStageCount> ns{};     // exclusive time in each stage
  std::array<std::int64_t, kStageCount> bytes{};  // least bytes its kernels read and wrote
};

// Process-wide switch; the totals are per thread (a rank computes on one).
void enableStageClock(bool on);
// This thread's totals since the last call, then zero.
StageTimes takeStageTimes();

namespace detail {
extern std::atomic<bool> stageClockOn;
int enterStage(Stage stage, std::int64_t bytes);
void leaveStage(int previous);
}  // namespace detail

// `count` values of Scalar, in bytes: what a StageScope is told a kernel moves.
template <class Scalar>
constexpr std::int64_t bytesOf(std::int64_t count) {
  return count * static_cast<std::int64_t>(sizeof(Scalar));
}

// Charges the time until it ends (less nested scopes) and `bytes` to `stage`.
class StageScope {
 public:
  explicit StageScope(Stage stage, std::int64_t bytes = 0) {
    if (detail::stageClockOn.load(std::memory_order_relaxed))
      previous_ = detail::enterStage(stage, bytes);
  }
  ~StageScope() {
    if (previous_ != kOff) detail::leaveStage(previous_);
  }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

 private:
  static constexpr int kOff = -2;
  int previous_ = kOff;
};

}  // namespace ringtrain::models
