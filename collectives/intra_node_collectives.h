// IntraNodeCollectives: the two halves of a hierarchical all-reduce that stay inside one node.
//
// HierarchicalAllreduce (hierarchical_allreduce.h) cuts a buffer into slices, reduces each slice
// inside the node onto one rank (reduce-scatter), all-reduces that slice across nodes over MPI,
// and spreads the result back inside the node (all-gather). Only the inside-the-node stages
// depend on where the data lives: on the CPU they are HostIntraNode's ring passes over MPI; with
// device buffers they are to be NCCL's reduce-scatter and all-gather on the node's GPUs. This
// interface is the seam between the algorithm and those two implementations.
#pragma once

#include <algorithm>
#include <cstddef>

#include "collectives/data_type.h"

namespace ringtrain::collectives {

// How a buffer of `count` elements is cut into `slices` slices: slice s covers
// [s*stride, (s+1)*stride) clipped to `count`, so trailing slices may be short or empty. Every
// rank of the job derives the same layout from (count, slices), whatever its node's size.
struct SliceLayout {
  std::size_t count = 0;
  std::size_t stride = 0;
  int slices = 1;

  std::size_t begin(int slice) const {
    return std::min(count, static_cast<std::size_t>(slice) * stride);
  }
  std::size_t length(int slice) const {
    return std::min(count, static_cast<std::size_t>(slice + 1) * stride) - begin(slice);
  }
};

class IntraNodeCollectives {
 public:
  virtual ~IntraNodeCollectives() = default;

  virtual int localRank() const = 0;
  virtual int localSize() const = 0;

  // Every local rank passes its `layout.count` elements in `send`; afterwards slice localRank()
  // of `recv` holds op over the node's ranks of that slice. The rest of `recv` is scratch.
  // layout.slices == localSize(). `send` == `recv` works in place. `op` never is kAverage: the
  // caller divides once, at the end, by the number of ranks of the whole job.
  virtual void reduceScatter(const void* send, void* recv, const SliceLayout& layout, DataType type,
                             ReduceOp op) = 0;
  // Slice r of `buffer` on local rank r reaches every local rank (layout.slices == localSize()).
  virtual void allgather(void* buffer, const SliceLayout& layout, DataType type) = 0;
  // Whole-buffer all-reduce and broadcast inside the node: for nodes with fewer ranks than the
  // largest node, where one rank owns several slices (see HierarchicalAllreduce).
  virtual void allreduce(const void* send, void* recv, std::size_t count, DataType type,
                         ReduceOp op) = 0;
  virtual void broadcast(void* buffer, std::size_t count, DataType type, int localRoot) = 0;
};

}  // namespace ringtrain::collectives
