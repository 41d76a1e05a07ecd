// IntraNodeCollectives: the two halves of a hierarchical all-reduce that stay inside one node.
//
// HierarchicalAllreduce (hierarchical_allreduce.h) cuts a buffer into slices, reduces each slice
// inside the node onto one rank (reduce-scatter), all-reduces that slice across nodes over MPI,
// and spreads the result back inside the node (all-gather). Only the inside-the-node stages
// depend on where the data lives: on the CPU they are HostIntraNode's ring passes over MPI; with
// device buffers they are NCCL's reduce-scatter and all-gather on the node's GPUs (NcclIntraNode).
// This interface is the seam between the algorithm and those two implementations; it also says
// where the buffers live, and moves a slice to host memory for the MPI stage across nodes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

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

  // Where the buffers live: host memory (false) or device memory (true).
  virtual bool takesDeviceBuffers() const = 0;
  // "" when `buffer` (of `count` elements; count > 0) is memory of the kind this implementation
  // takes, else what is wrong with it, naming `what` ("all-reduce send").
  virtual std::string bufferProblem(const void* buffer, std::size_t count,
                                    const char* what) const = 0;
  // The MPI stages read and write host memory. hostCopyOf returns host memory holding the
  // `bytes` bytes at `data`: `data` itself for host buffers; for device buffers a pinned copy
  // owned by this object, valid until the next call of hostCopyOf.
  virtual std::byte* hostCopyOf(void* data, std::size_t bytes) = 0;
  // Copies `bytes` bytes between this implementation's buffers and hostCopyOf's memory, in any
  // direction; returns when done. Nothing happens when destination == source.
  virtual void copy(void* destination, const void* source, std::size_t bytes) = 0;
};

}  // namespace ringtrain::collectives
