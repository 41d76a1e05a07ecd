#include "collectives/host_intra_node.h"

#include <cstring>

namespace ringtrain::collectives {
// Every ring neighbour is on this node: shared-memory chunks on both sides.
HostIntraNode::HostIntraNode(MPI_Comm nodeComm, const CommunicatorOptions& options)
    : pipeline_(nodeComm, sharedMemoryChunking(options),
                options.yieldWhileWaiting ? WaitMode::kYield : WaitMode::kSpin),
      allreduce_(pipeline_),
      mpi_(nodeComm, innerOptions(options)) {}

RingLayout HostIntraNode::ringLayout(const SliceLayout& layout) {
  return {layout.count, layout.stride};
}

// A ring pass of n-1 reduce steps that starts by sending segment r-1 leaves rank r holding
// segment r fully reduced (RingPipeline: step s receives segment firstSegment - s - 1, so the
// last step, n-2, receives firstSegment + 1 - n = r mod n).
void HostIntraNode::reduceScatter(const void* send, void* recv, const SliceLayout& layout,
                                  DataType type, ReduceOp op) {
  const int n = localSize();
  const std::size_t elementSize = sizeOf(type);
  if (n == 1) {
    if (send != recv && layout.count > 0) std::memcpy(recv, send, layout.count * elementSize);
    return;
  }
  RingPass pass;
  pass.layout = ringLayout(layout);
  pass.type = type;
  pass.op = op;
  pass.firstSegment = (localRank() - 1 + n) % n;
  pass.steps = n - 1;
  pass.reduceSteps = n - 1;
  pass.own = static_cast<const std::byte*>(send);
  pass.firstSend = pass.own + layout.begin(pass.firstSegment) * elementSize;
  pass.out = static_cast<std::byte*>(recv);
  pipeline_.run(pass);
}

void HostIntraNode::allgather(void* buffer, const SliceLayout& layout, DataType type) {
  RingPass pass;
  pass.layout = ringLayout(layout);
  pass.type = type;
  pass.firstSegment = localRank();
  pass.steps = localSize() - 1;
  pass.reduceSteps = 0;
  pass.out = static_cast<std::byte*>(buffer);
  pass.firstSend = pass.out + layout.begin(localRank()) * sizeOf(type);
  pipeline_.run(pass);
}

void HostIntraNode::allreduce(const void* send, void* recv, std::size_t count, DataType type,
                              ReduceOp op) {
  allreduce_.run(send, recv, count, type, op);
}

void HostIntraNode::broadcast(void* buffer, std::size_t count, DataType type, int localRoot) {
  if (localSize() > 1) mpi_.broadcast(buffer, count, type, localRoot);
}

void HostIntraNode::copy(void* destination, const void* source, std::size_t bytes) {
  if (destination != source && bytes > 0) std::memcpy(destination, source, bytes);
}

}  // namespace ringtrain::collectives
