// TraceSink: where collectives report timed spans (a timeline, in the trainer), without knowing
// what records them.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/steady_clock.h"

namespace ringtrain {

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // A finished span of work on the calling thread; times are steady-clock nanoseconds. `bytes`
  // (>= 0) and `backend` (non-empty) describe a transfer. `name` and `backend` must outlive the
  // sink (string literals, or names the caller keeps). Thread-safe.
  virtual void span(std::string_view name, std::string_view category, std::int64_t startNs,
                    std::int64_t endNs, std::int64_t bytes = -1, std::string_view backend = {}) = 0;
};

}  // namespace ringtrain
