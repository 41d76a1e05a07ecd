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

class RingAllreduce {
 public:
  explicit RingAllreduce(RingPipeline& pipeline) : pipeline_(pipeline) {}
  // `send` == `recv` reduces in place. No agreement check here: RingCommunicator does that first.
  void run(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);

 private:
  RingPipeline& pipeline_;
};

}  // namespace ringtrain::collectives
