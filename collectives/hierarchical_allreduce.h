// HierarchicalAllreduce: all-reduce in three stages, as Horovod's hierarchical all-reduce does it.
//
//   1. reduce-scatter inside the node: local rank r ends up with slice r reduced over its node;
//   2. all-reduce of each slice across nodes, among the ranks that carry it (one per node), with
//      MPI on host buffers;
//   3. all-gather inside the node: every local rank receives every slice.
//
// Only 1/localSize of the buffer crosses node boundaries per rank, and every node's link to the
// network is used by all of its ranks at once, each for its own slice. The buffer is cut into
// as many slices as the largest node has ranks (SliceLayout), the same on every rank, so every
// slice has one carrier per node (NodeTopology). A node with fewer ranks than the largest one
// all-reduces the whole buffer inside the node instead of stage 1, lets each of its ranks carry
// several slices, and broadcasts each slice from its carrier instead of stage 3: correct, if
// slower, for uneven nodes.
//
// Every element's final value is computed once, by stage 2's MPI all-reduce (which gives every
// participant the same bits) and, for averages, one division by the number of ranks of the whole
// job; stages 3 only copy it. So every rank of the job holds the same bits.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "collectives/intra_node_collectives.h"
#include "collectives/mpi_communicator.h"
#include "collectives/node_topology.h"

namespace ringtrain::collectives {

class HierarchicalAllreduce {
 public:
  // `intraNode` runs stages 1 and 3 on topology.nodeComm()'s ranks; both must outlive this.
  HierarchicalAllreduce(const NodeTopology& topology, IntraNodeCollectives& intraNode,
                        int worldSize, const CommunicatorOptions& options);
  // `send` == `recv` reduces in place. No agreement check here: the caller does that first.
  void run(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  // The slicing of a buffer of `count` elements of `type`.
  SliceLayout layout(std::size_t count, DataType type) const;

 private:
  const NodeTopology& topology_;
  IntraNodeCollectives& intraNode_;
  int worldSize_;
  // Stage 2: for each carried slice, MPI among its carriers.
  std::vector<std::pair<int, std::unique_ptr<MpiCommunicator>>> crossNode_;
};

}  // namespace ringtrain::collectives
