// RingAllgather: every rank's block reaches every rank in n-1 ring steps, chunked and pipelined
// like the all-gather half of RingAllreduce.
#pragma once

#include <cstddef>

#include "collectives/ring_pipeline.h"

namespace ringtrain::collectives {

class RingAllgather {
 public:
  explicit RingAllgather(RingPipeline& pipeline) : pipeline_(pipeline) {}
  // recv holds size * countPerRank elements; `send` may be this rank's block inside recv.
  void run(const void* send, void* recv, std::size_t countPerRank, DataType type);

 private:
  RingPipeline& pipeline_;
};

}  // namespace ringtrain::collectives
