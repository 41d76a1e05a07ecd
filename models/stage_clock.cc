#include "models/stage_clock.h"

#include "base/steady_clock.h"

namespace ringtrain::models {
namespace detail {

std::atomic<bool> stageClockOn{false};

namespace {
constexpr int kNone = -1;  // outside every scope: not counted
thread_local StageTimes totals;
thread_local int current = kNone;
thread_local std::int64_t since = 0;

void chargeCurrent(std::int64_t now) {
  if (current != kNone) totals.ns[static_cast<std::size_t>(current)] += now - since;
  since = now;
}
}  // namespace

int enterStage(Stage stage, std::int64_t bytes) {
  chargeCurrent(steadyNowNs());
  const int previous = current;
  current = static_cast<int>(stage);
  totals.bytes[static_cast<std::size_t>(current)] += bytes;
  return previous;
}

void leaveStage(int previous) {
  chargeCurrent(steadyNowNs());
  current = previous;
}

}  // namespace detail

void enableStageClock(bool on) {
  detail::stageClockOn.store(on, std::memory_order_relaxed);
}

StageTimes takeStageTimes() {
  StageTimes taken = detail::totals;
  detail::totals = {};
  return taken;
}

}  // namespace ringtrain::models
