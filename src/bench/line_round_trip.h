// LineRoundTrip: how long one cache line takes to go from one core to another and back, between
// the first two ranks of world rank 0's node. On this project's VM the two cores either share
// a cache (~80 ns) or not (~330 ns), the placement changes from minute to minute, and it decides
// which all-reduce is fastest (docs/collectives.md), so every measurement records it.
#pragma once

#include <memory>

#include <mpi.h>

#include "collectives/shared_memory_window.h"

namespace ringtrain::bench {

class LineRoundTrip {
 public:
  // Collective over MPI_COMM_WORLD.
  LineRoundTrip();
  ~LineRoundTrip();
  LineRoundTrip(const LineRoundTrip&) = delete;
  LineRoundTrip& operator=(const LineRoundTrip&) = delete;

  // Collective: the median of 9 groups of 64 round trips, in ns, on every rank; -1 where world
  // rank 0 has no other rank on its node.
  double measureNs();

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  bool paired_ = false;  // world rank 0's node holds at least 2 ranks
  std::unique_ptr<collectives::SharedMemoryWindow> window_;
};

}  // namespace ringtrain::bench
