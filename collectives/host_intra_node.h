// HostIntraNode: the inside-the-node stages of a hierarchical all-reduce for host buffers, as
// ring passes over MPI on the node's communicator (the machinery of the `ring` backend).
#pragma once

#include "collectives/communicator.h"
#include "collectives/intra_node_collectives.h"
#include "collectives/mpi_communicator.h"
#include "collectives/ring_allreduce.h"
#include "collectives/ring_pipeline.h"

namespace ringtrain::collectives {

// Reduce-scatter is the first half of RingAllreduce's pass and all-gather its second half, run
// as two passes so that the cross-node all-reduce can happen in between. The ranks agreed on the
// collective before (HierarchicalCommunicator checks it on the whole communicator), so nothing
// is checked here. `nodeComm` must outlive this object.
class HostIntraNode final : public IntraNodeCollectives {
 public:
  HostIntraNode(MPI_Comm nodeComm, const CommunicatorOptions& options);

  int localRank() const override { return pipeline_.rank(); }
  int localSize() const override { return pipeline_.size(); }
  void reduceScatter(const void* send, void* recv, const SliceLayout& layout, DataType type,
                     ReduceOp op) override;
  void allgather(void* buffer, const SliceLayout& layout, DataType type) override;
  void allreduce(const void* send, void* recv, std::size_t count, DataType type,
                 ReduceOp op) override;
  void broadcast(void* buffer, std::size_t count, DataType type, int localRoot) override;
  // Host buffers are where MPI reads them: no copies.
  bool takesDeviceBuffers() const override { return false; }
  std::string bufferProblem(const void*, std::size_t, const char*) const override { return ""; }
  std::byte* hostCopyOf(void* data, std::size_t) override { return static_cast<std::byte*>(data); }
  void copy(void* destination, const void* source, std::size_t bytes) override;

 private:
  static RingLayout ringLayout(const SliceLayout& layout);

  RingPipeline pipeline_;
  RingAllreduce allreduce_;
  MpiCommunicator mpi_;  // broadcast
};

}  // namespace ringtrain::collectives
