// RingAllreduce: bandwidth-optimal all-reduce over point-to-point messages.
//
// The buffer is cut into one segment per rank. Reduce-scatter: in n-1 steps each segment travels
// once round the ring, every rank adding its own contribution as it passes, so that rank r ends
// up holding segment r+1 fully reduced. All-gather: in n-1 more steps the reduced segments travel
// round again and every rank stores them. Each rank sends and receives 2(n-1)/n of the buffer, the
// minimum for an all-reduce; every segment is reduced by exactly one rank and then copied, so all
// ranks hold the same bits. Chunking and pipelining are RingPipeline's.
#pragma once

#include <cstddef>

#include "collectives/neighbour_caches.h"
#include "collectives/ring_pipeline.h"

namespace ringtrain::collectives {

class RingAllreduce {
 public:
  explicit RingAllreduce(RingPipeline& pipeline) : pipeline_(pipeline) {}
  // `send` == `recv` reduces in place. No agreement check here: RingCommunicator does that first.
  // `caches` only changes how results are written (the messages and the bits are the same):
  // kShared receives in place straight into `recv`, and stores reductions of at least
  // kCachedStoreBytes through the cache; kSeparate streams past it (reduce_kernels.h).
  void run(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
           NeighbourCaches caches = NeighbourCaches::kSeparate);

  // Below this, streaming stores were faster even where the cores share a cache (2 ranks).
  static constexpr std::size_t kCachedStoreBytes = 512 * 1024;

 private:
  RingPipeline& pipeline_;
};

}  // namespace ringtrain::collectives
