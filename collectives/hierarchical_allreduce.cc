#include "collectives/hierarchical_allreduce.h"

#include "collectives/aligned_buffer.h"
#include "collectives/reduce_kernels.h"

namespace ringtrain::collectives {

HierarchicalAllreduce::HierarchicalAllreduce(const NodeTopology& topology,
                                             IntraNodeCollectives& intraNode, int worldSize,
                                             const CommunicatorOptions& options)
    : topology_(topology), intraNode_(intraNode), worldSize_(worldSize) {
  for (const auto& [slice, comm] : topology.carriedSlices()) {
    crossNode_.emplace_back(slice, std::make_unique<MpiCommunicator>(comm, innerOptions(options)));
  }
}

SliceLayout HierarchicalAllreduce::layout(std::size_t count, DataType type) const {
  // Slices start on cache-line boundaries, so no two ranks write the same line.
  const std::size_t lineElements = AlignedBuffer::kAlignment / sizeOf(type);
  const auto slices = static_cast<std::size_t>(topology_.largestNodeSize());
  const std::size_t perSlice = (count + slices - 1) / slices;
  SliceLayout layout;
  layout.count = count;
  layout.stride = (perSlice + lineElements - 1) / lineElements * lineElements;
  layout.slices = topology_.largestNodeSize();
  return layout;
}

void HierarchicalAllreduce::run(const void* send, void* recv, std::size_t count, DataType type,
                                ReduceOp op) {
  // Averages are sums until the very end, then divided once by the ranks of the whole job: a
  // per-stage average would divide by the wrong counts (and round more than once).
  const ReduceOp partial = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  const SliceLayout slices = layout(count, type);
  const std::size_t elementSize = sizeOf(type);
  auto* out = static_cast<std::byte*>(recv);
  const bool fullNode = topology_.localSize() == topology_.largestNodeSize();

  if (fullNode) {
    intraNode_.reduceScatter(send, recv, slices, type, partial);
  } else {
    intraNode_.allreduce(send, recv, count, type, partial);
  }
  // Carried slices in ascending order on every rank: each cross-node communicator's members
  // reach it after finishing the lower-numbered ones, so the blocking calls cannot deadlock.
  // The slice goes through host memory (a pinned copy for device buffers; the slice itself for
  // host buffers), where MPI reduces it and the one division of an average happens.
  for (auto& [slice, crossNode] : crossNode_) {
    std::byte* data = out + slices.begin(slice) * elementSize;
    const std::size_t length = slices.length(slice);
    if (crossNode->size() == 1 && op != ReduceOp::kAverage) continue;
    std::byte* host = intraNode_.hostCopyOf(data, length * elementSize);
    if (crossNode->size() > 1) crossNode->allreduce(host, host, length, type, partial);
    if (op == ReduceOp::kAverage) divideArray(type, host, length, worldSize_);
    intraNode_.copy(data, host, length * elementSize);
  }
  if (fullNode) {
    intraNode_.allgather(recv, slices, type);
  } else {
    for (int slice = 0; slice < slices.slices; ++slice) {
      intraNode_.broadcast(out + slices.begin(slice) * elementSize, slices.length(slice), type,
                           slice % topology_.localSize());
    }
  }
}

}  // namespace ringtrain::collectives
