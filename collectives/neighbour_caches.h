// NeighbourCacheProbe: whether this rank's core shares a cache with its ring neighbours', measured
// by bouncing cache lines between them.
//
// It decides how the ring writes its results (ring_allreduce.h). Where the cores share a cache,
// a line the neighbour read costs little to overwrite, and results stored through the cache and
// received straight into the output are fastest; where they do not (two chiplets, or a VM whose
// vCPUs are placed so), every such overwrite crosses between the caches and only non-temporal
// stores into lines nobody else read stay fast. A line's round trip tells the two apart (~80 ns
// against ~330 ns on this project's VM, whose placement changes from minute to minute: hence a
// new probe every kEveryCalls ring collectives).
#pragma once

#include <cstdint>
#include <memory>

#include <mpi.h>

#include "collectives/request_wait.h"

namespace ringtrain::collectives {

enum class NeighbourCaches { kSeparate, kShared };

class SharedMemoryWindow;

class NeighbourCacheProbe {
 public:
  // Collective over `comm`. Where its ranks are not all on one node there is nothing to probe,
  // and update() always answers kSeparate.
  NeighbourCacheProbe(MPI_Comm comm, WaitMode waitMode);
  ~NeighbourCacheProbe();

  // Collective: every rank calls it at the same point of the same collectives. Measures on the
  // first call and every kEveryCalls after it; returns the current guess.
  NeighbourCaches update();

  // Collective: the median time (ns) of one round trip of a line between this rank and its ring
  // neighbours; -1 where the ranks are not all on one node. update() calls it.
  double measureRoundTripNs();

  // kShared below this median round trip (ns).
  static constexpr double kSharedBelowNs = 150;
  static constexpr std::uint64_t kEveryCalls = 64;
  static NeighbourCaches fromRoundTripNs(double ns) {
    return ns < kSharedBelowNs ? NeighbourCaches::kShared : NeighbourCaches::kSeparate;
  }

 private:
  std::unique_ptr<SharedMemoryWindow> window_;  // one line per rank; null across nodes
  WaitMode waitMode_;
  NeighbourCaches guess_ = NeighbourCaches::kSeparate;
  std::uint64_t calls_ = 0;
  std::int64_t lastValue_ = 0;  // what the lines last held: every probe writes new values
};

}  // namespace ringtrain::collectives
