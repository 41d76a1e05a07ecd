// Steady-clock time in nanoseconds: the time base of progress records, traces and timelines.
#pragma once

#include <chrono>
#include <cstdint>

namespace ringtrain {

inline std::int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ringtrain
