// RingPipeline: the chunked, pipelined transfer engine under the ring all-reduce and all-gather.
#pragma once

#include <cstddef>
#include <vector>

#include <mpi.h>

#include "collectives/aligned_buffer.h"
#include "collectives/data_type.h"
#include "collectives/reduce_kernels.h"
#include "collectives/request_wait.h"
#include "collectives/ring_chunking.h"

namespace ringtrain::collectives {

// How a ring cuts a buffer of `count` elements: segment i covers [i*stride, (i+1)*stride) clipped
// to `count` (so trailing segments may be short or empty). How a segment is cut into messages is
// RingPipeline's (RingChunking): both ends of every hop cut it the same way.
struct RingLayout {
  std::size_t count = 0;
  std::size_t stride = 0;

  std::size_t segmentBegin(int segment) const;
  std::size_t segmentLength(int segment) const;
  // Messages of at most `chunkElements` elements that `segment` takes.
  std::size_t chunkCount(int segment, std::size_t chunkElements) const;
};

// One pass round the ring. At step s every rank sends segment (firstSegment - s) mod n to its
// right neighbour and receives segment (firstSegment - s - 1) mod n from its left one; because
// everybody's firstSegment is its own rank (plus a constant), what a rank receives at step s is
// exactly what its right neighbour expects from it at step s+1. The first `reduceSteps` steps
// combine what arrives with this rank's own contribution (reduce-scatter), the remaining steps
// store it (all-gather).
struct RingPass {
  RingLayout layout;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int firstSegment = 0;
  int steps = 0;
  int reduceSteps = 0;
  int divisor = 1;                       // applied on the last reduce step (averages)
  const std::byte* own = nullptr;        // this rank's input, laid out like `out` (reduce steps)
  const std::byte* firstSend = nullptr;  // the data step 0 sends (segment firstSegment)
  std::byte* out = nullptr;
  // How results are written (RingAllreduce chooses): in place, stored chunks land in scratch
  // and are streamed into `out` unless landInOut; the reduce steps write `out` with reduceStore.
  bool landInOut = false;
  StoreMode reduceStore = StoreMode::kStreaming;
};

class RingPipeline {
 public:
  RingPipeline(MPI_Comm comm, const RingChunking& chunking, WaitMode waitMode);

  int rank() const { return rank_; }
  int size() const { return size_; }

  void run(const RingPass& pass);

 private:
  class Run;  // the state of one run (ring_pipeline.cc)

  // Chunk length in elements of `elementSize` bytes: `bytes` rounded down to whole cache lines,
  // at least one cache line.
  static std::size_t chunkElements(std::size_t bytes, std::size_t elementSize);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  RingChunking chunking_;
  WaitMode waitMode_;
  AlignedBuffer scratch_;  // receiveDepth landing slots for chunks that are reduced, not stored
  std::vector<MPI_Request> sends_;
  std::vector<MPI_Request> receives_;
  std::vector<int> lastSendFromOut_;  // per (segment, send chunk): index in sends_ of its last send
};

}  // namespace ringtrain::collectives
