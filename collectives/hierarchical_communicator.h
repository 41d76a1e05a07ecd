// The `hierarchical` backend: all-reduce as reduce-scatter inside the node, all-reduce of each
// slice across nodes, all-gather inside the node (HierarchicalAllreduce), with the call checked
// first. `hierarchical` takes host buffers (HostIntraNode); `hierarchical-nccl` (GPU builds) takes
// device buffers, with NCCL inside the node (NcclIntraNode) -- Horovod's hierarchical all-reduce.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/intra_node_collectives.h"
#include "collectives/mpi_communicator.h"
#include "collectives/node_topology.h"
#include "collectives/recursive_doubling.h"

namespace ringtrain::collectives {

// Makes the inside-the-node stages for the node communicator `nodeComm` (which outlives them).
using IntraNodeFactory = std::function<std::unique_ptr<IntraNodeCollectives>(
    MPI_Comm nodeComm, const CommunicatorOptions& options)>;

// Like TunedCommunicator, every collective starts with RecursiveDoubling's agreement on (sequence
// number, kind, count, type, op, root) over the whole communicator. Nodes are
// MPI_COMM_TYPE_SHARED, or every options.test.ranksPerNode consecutive ranks in tests and
// benchmarks.
//
// Host buffers: all-reduces of at most options.ringSmallMessageBytes are done within the
// agreement's exchange (latency-bound sizes gain nothing from three stages); larger ones take the
// hierarchical path. Broadcast, all-gather and barrier, after the check, are MPI's.
//
// Device buffers (an IntraNodeCollectives that takes them): every all-reduce takes the three
// stages, the middle one through pinned host memory. A buffer that is not device memory is
// refused on its rank (std::invalid_argument) and fails the agreement on the others
// (CollectiveMismatchError). Broadcast and all-gather copy the buffer to host memory, run MPI's
// and copy it back: correct, not fast (they are not on the training step's path).
class HierarchicalCommunicator final : public Communicator {
 public:
  // `hierarchical`: host buffers.
  HierarchicalCommunicator(MPI_Comm comm, const CommunicatorOptions& options);
  // A variant named `name` whose inside-the-node stages makeIntraNode makes.
  HierarchicalCommunicator(MPI_Comm comm, const CommunicatorOptions& options, std::string name,
                           const IntraNodeFactory& makeIntraNode);
  std::string_view backendName() const override { return name_; }
  const NodeTopology& topology() const { return topology_; }
  const IntraNodeCollectives& intraNode() const { return *intraNode_; }

 protected:
  void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op) override;
  void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) override;
  void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                     DataType type) override;
  void barrierImpl() override;

 private:
  std::string name_;
  RecursiveDoubling agreement_;
  NodeTopology topology_;
  std::unique_ptr<IntraNodeCollectives> intraNode_;
  HierarchicalAllreduce allreduce_;
  MpiCommunicator mpi_;  // broadcast, all-gather and barrier
};

}  // namespace ringtrain::collectives
