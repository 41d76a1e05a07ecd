#include "collectives/hierarchical_communicator.h"

#include <utility>

#include "collectives/host_intra_node.h"

namespace ringtrain::collectives {

HierarchicalCommunicator::HierarchicalCommunicator(MPI_Comm comm,
                                                   const CommunicatorOptions& options)
    : HierarchicalCommunicator(comm, options, "hierarchical",
                               [](MPI_Comm nodeComm, const CommunicatorOptions& nodeOptions) {
                                 return std::make_unique<HostIntraNode>(nodeComm, nodeOptions);
                               }) {}

HierarchicalCommunicator::HierarchicalCommunicator(MPI_Comm comm,
                                                   const CommunicatorOptions& options,
                                                   std::string name,
                                                   const IntraNodeFactory& makeIntraNode)
    : Communicator(comm, options),
      name_(std::move(name)),
      agreement_(this->comm(), options.ringSmallMessageBytes, waitMode()),
      topology_(this->comm(), options.test.ranksPerNode),
      intraNode_(makeIntraNode(topology_.nodeComm(), options)),
      allreduce_(topology_, *intraNode_, size(), options),
      mpi_(comm, innerOptions(options)) {}

void HierarchicalCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count,
                                             DataType type, ReduceOp op) {
  const CallSignature signature = makeSignature(collectiveCount(), CollectiveKind::kAllreduce,
                                                count, type, static_cast<int>(op));
  if (!intraNode_->takesDeviceBuffers() &&
      count * sizeOf(type) <= options().ringSmallMessageBytes) {
    agreement_.allreduce(signature, send, recv, count, type, op);
    return;
  }
  std::string problem = intraNode_->bufferProblem(send, count, "all-reduce send");
  if (problem.empty()) problem = intraNode_->bufferProblem(recv, count, "all-reduce recv");
  agreeUnlessRefused(agreement_, signature, problem);
  allreduce_.run(send, recv, count, type, op);
}

void HierarchicalCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type,
                                             int root) {
  agreeUnlessRefused(
      agreement_,
      makeSignature(collectiveCount(), CollectiveKind::kBroadcast, count, type, -1, root),
      intraNode_->bufferProblem(buffer, count, "broadcast"));
  const std::size_t bytes = count * sizeOf(type);
  std::byte* host = intraNode_->hostCopyOf(buffer, bytes);
  mpi_.broadcast(host, count, type, root);
  intraNode_->copy(buffer, host, bytes);
}

void HierarchicalCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                             DataType type) {
  const std::size_t bytes = countPerRank * sizeOf(type);
  std::string problem = intraNode_->bufferProblem(send, countPerRank, "all-gather send");
  if (problem.empty()) {
    problem = intraNode_->bufferProblem(recv, countPerRank * static_cast<std::size_t>(size()),
                                        "all-gather recv");
  }
  agreeUnlessRefused(
      agreement_, makeSignature(collectiveCount(), CollectiveKind::kAllgather, countPerRank, type),
      problem);
  if (!intraNode_->takesDeviceBuffers()) {
    mpi_.allgather(send, recv, countPerRank, type);
    return;
  }
  // Through host memory: this rank's block first into its place in recv, then the whole of recv
  // to the host, MPI's in-place all-gather there, and back.
  const std::size_t total = bytes * static_cast<std::size_t>(size());
  const std::size_t ownOffset = bytes * static_cast<std::size_t>(rank());
  intraNode_->copy(static_cast<std::byte*>(recv) + ownOffset, send, bytes);
  std::byte* host = intraNode_->hostCopyOf(recv, total);
  mpi_.allgather(host + ownOffset, host, countPerRank, type);
  intraNode_->copy(recv, host, total);
}

void HierarchicalCommunicator::barrierImpl() {
  mpi_.barrier();
}

}  // namespace ringtrain::collectives
