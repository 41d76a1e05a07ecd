#include "collectives/ring_allreduce.h"

#include <cstring>

#include "collectives/reduce_kernels.h"

namespace ringtrain::collectives {

RingLayout RingAllreduce::layout(std::size_t count, DataType type) const {
  const std::size_t n = static_cast<std::size_t>(pipeline_.size());
  const std::size_t lineElements = AlignedBuffer::kAlignment / sizeOf(type);
  const std::size_t perRank = (count + n - 1) / n;
  return {count, (perRank + lineElements - 1) / lineElements * lineElements};
}

ElementRange RingAllreduce::shard(std::size_t count, DataType type, int rank) const {
  if (pipeline_.size() == 1) return {0, count};
  // After the reduce steps rank r holds segment r+1 (ring_pipeline.h: RingPass).
  const RingLayout cut = layout(count, type);
  const int segment = (rank + 1) % pipeline_.size();
  return {cut.segmentBegin(segment), cut.segmentBegin(segment) + cut.segmentLength(segment)};
}

RingPass RingAllreduce::reducePass(const void* send, void* recv, std::size_t count, DataType type,
                                   ReduceOp op, int steps) const {
  const int n = pipeline_.size();
  RingPass pass;
  pass.layout = layout(count, type);
  pass.type = type;
  pass.op = op;
  pass.firstSegment = pipeline_.rank();
  pass.steps = steps;
  pass.reduceSteps = n - 1;
  pass.divisor = op == ReduceOp::kAverage ? n : 1;
  pass.own = static_cast<const std::byte*>(send);
  pass.firstSend = pass.own + pass.layout.segmentBegin(pipeline_.rank()) * sizeOf(type);
  pass.out = static_cast<std::byte*>(recv);
  return pass;
}

void RingAllreduce::run(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                        RingWrites writes) {
  const int n = pipeline_.size();
  if (n == 1) {
    if (send != recv && count > 0) std::memcpy(recv, send, count * sizeOf(type));
    return;  // an average over one rank is the value itself
  }
  RingPass pass = reducePass(send, recv, count, type, op, 2 * (n - 1));
  if (writes == RingWrites::kCached) {
    pass.landInOut = true;
    if (count * sizeOf(type) >= kCachedStoreBytes) pass.reduceStore = StoreMode::kCached;
  }
  pipeline_.run(pass);
}

void RingAllreduce::reduceScatter(const void* send, void* recv, std::size_t count, DataType type,
                                  ReduceOp op) {
  const int n = pipeline_.size();
  if (n == 1) {
    run(send, recv, count, type, op);
    return;
  }
  pipeline_.run(reducePass(send, recv, count, type, op, n - 1));
}

void RingAllreduce::allgather(void* buffer, std::size_t count, DataType type, DataType cutAs) {
  const int n = pipeline_.size();
  if (n == 1) return;
  // The all-reduce's steps n-1 .. 2(n-1)-1: step n-1 sends the segment the reduce steps left
  // here, rank + 1.
  RingPass pass;
  pass.layout = layout(count, cutAs);
  pass.type = type;
  pass.firstSegment = (pipeline_.rank() + 1) % n;
  pass.steps = n - 1;
  pass.reduceSteps = 0;
  pass.out = static_cast<std::byte*>(buffer);
  pass.firstSend = pass.out + pass.layout.segmentBegin(pass.firstSegment) * sizeOf(type);
  pipeline_.run(pass);
}

}  // namespace ringtrain::collectives
