#include "collectives/ring_allreduce.h"

#include <cstring>

#include "collectives/reduce_kernels.h"

namespace ringtrain::collectives {

void RingAllreduce::run(const void* send, void* recv, std::size_t count, DataType type,
                        ReduceOp op, RingWrites writes) {
  const int n = pipeline_.size();
  const std::size_t elementSize = sizeOf(type);
  if (n == 1) {
    if (send != recv && count > 0) std::memcpy(recv, send, count * elementSize);
    return;  // an average over one rank is the value itself
  }
  // Segments start on cache-line boundaries so that no two ranks' segments share a line.
  const std::size_t lineElements = AlignedBuffer::kAlignment / elementSize;
  const std::size_t perRank = (count + n - 1) / n;
  RingPass pass;
  pass.layout.count = count;
  pass.layout.stride = (perRank + lineElements - 1) / lineElements * lineElements;
  pass.type = type;
  pass.op = op;
  pass.firstSegment = pipeline_.rank();
  pass.steps = 2 * (n - 1);
  pass.reduceSteps = n - 1;
  pass.divisor = op == ReduceOp::kAverage ? n : 1;
  pass.own = static_cast<const std::byte*>(send);
  pass.firstSend = pass.own + pass.layout.segmentBegin(pipeline_.rank()) * elementSize;
  pass.out = static_cast<std::byte*>(recv);
  if (writes == RingWrites::kCached) {
    pass.landInOut = true;
    if (count * elementSize >= kCachedStoreBytes) pass.reduceStore = StoreMode::kCached;
  }
  pipeline_.run(pass);
}

}  // namespace ringtrain::collectives
