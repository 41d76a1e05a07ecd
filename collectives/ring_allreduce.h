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

#include "collectives/ring_pipeline.h"

namespace ringtrain::collectives {

// How the ring writes its results; the messages and the bits are the same either way.
// kStreamed: in place, the all-gather's chunks land in scratch and are streamed into the buffer,
// and reductions are stored past the cache: safe where the ring neighbours' cores share no cache
// (overwriting a line the neighbour read then crosses between caches). kCached: in place, chunks
// land straight in the buffer, and reductions of at least kCachedStoreBytes go through the cache:
// faster where the cores share one. The tuning table chooses (allreduce_tuning.h).
enum class RingWrites { kStreamed, kCached };

class RingAllreduce {
 public:
  explicit RingAllreduce(RingPipeline& pipeline) : pipeline_(pipeline) {}
  // `send` == `recv` reduces in place. No agreement check here: the communicator does that first.
  void run(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
           RingWrites writes = RingWrites::kStreamed);

  // kCached: below this, reductions are still stored past the cache (faster there, 2 ranks).
  static constexpr std::size_t kCachedStoreBytes = 512 * 1024;

 private:
  RingPipeline& pipeline_;
};

}  // namespace ringtrain::collectives
