// RingAllreduce: bandwidth-optimal all-reduce over point-to-point messages.
//
// The buffer is cut into one segment per rank. Reduce-scatter: in n-1 steps each segment travels
// once round the ring, every rank adding its own contribution as it passes, so that rank r ends
// up holding segment r+1 fully reduced. All-gather: in n-1 more steps the reduced segments travel
// round again and every rank stores them. Each rank sends and receives 2(n-1)/n of the buffer, the
// minimum for an all-reduce; every segment is reduced by exactly one rank and then copied, so all
// ranks hold the same bits. Chunking and pipelining are RingPipeline's.
//
// ZeRO-1 runs the two phases apart: reduceScatter is the first (the same pass, stopped after the
// reduce steps: the same bits in the shard it leaves), allgather the second on another buffer.
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

  // The first phase alone: recv's shard(count, type) ends up reduced, the rest is scratch.
  void reduceScatter(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  // The second phase alone, in place: every rank's shard of `buffer` (`count` elements of
  // `type`, cut as a buffer of `count` elements of `cutAs` is) reaches every rank.
  void allgather(void* buffer, std::size_t count, DataType type, DataType cutAs);
  // The segment of a buffer of `count` elements of `type` that the first phase leaves reduced on
  // rank `rank`.
  ElementRange shard(std::size_t count, DataType type, int rank) const;

  // kCached: below this, reductions are still stored past the cache (faster there, 2 ranks).
  static constexpr std::size_t kCachedStoreBytes = 512 * 1024;

 private:
  // How a buffer of `count` elements of `type` is cut, one segment per rank, each starting on a
  // cache-line boundary so that no two ranks' segments share a line.
  RingLayout layout(std::size_t count, DataType type) const;
  // The all-reduce's pass, `steps` of it long (2(n-1): all of it; n-1: the first phase).
  RingPass reducePass(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                      int steps) const;

  RingPipeline& pipeline_;
};

}  // namespace ringtrain::collectives
