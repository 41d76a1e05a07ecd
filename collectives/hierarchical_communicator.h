// The `hierarchical` backend: all-reduce as reduce-scatter inside the node, all-reduce of each
// slice across nodes, all-gather inside the node (HierarchicalAllreduce), with the call checked
// first.
#pragma once

#include "collectives/communicator.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/host_intra_node.h"
#include "collectives/mpi_communicator.h"
#include "collectives/node_topology.h"
#include "collectives/recursive_doubling.h"

namespace ringtrain::collectives {

// Like RingCommunicator, every collective starts with RecursiveDoubling's agreement on (sequence
// number, kind, count, type, op, root) over the whole communicator, and all-reduces of at most
// options.ringSmallMessageBytes are done within that exchange (latency-bound sizes gain nothing
// from three stages). Larger all-reduces take the hierarchical path. Broadcast, all-gather and
// barrier, after the check, are MPI's. Nodes are MPI_COMM_TYPE_SHARED, or every
// options.testRanksPerNode consecutive ranks in tests and benchmarks.
class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(MPI_Comm comm, const CommunicatorOptions& options);
  std::string_view backendName() const override { return "hierarchical"; }
  const NodeTopology& topology() const { return topology_; }

 protected:
  void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op) override;
  void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) override;
  void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                     DataType type) override;
  void barrierImpl() override;

 private:
  RecursiveDoubling agreement_;
  NodeTopology topology_;
  HostIntraNode intraNode_;
  HierarchicalAllreduce allreduce_;
  MpiCommunicator mpi_;  // broadcast, all-gather and barrier
};

}  // namespace ringtrain::collectives
