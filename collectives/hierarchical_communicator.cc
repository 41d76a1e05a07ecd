#include "collectives/hierarchical_communicator.h"

namespace ringtrain::collectives {
HierarchicalCommunicator::HierarchicalCommunicator(MPI_Comm comm,
                                                   const CommunicatorOptions& options)
    : Communicator(comm, options),
      agreement_(this->comm(), options.ringSmallMessageBytes, waitMode()),
      topology_(this->comm(), options.testRanksPerNode),
      intraNode_(topology_.nodeComm(), options),
      allreduce_(topology_, intraNode_, size(), options),
      mpi_(comm, withoutTestFault(options)) {}

void HierarchicalCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count,
                                             DataType type, ReduceOp op) {
  const CallSignature signature = makeSignature(collectiveCount(), CollectiveKind::kAllreduce,
                                                count, type, static_cast<int>(op));
  if (count * sizeOf(type) <= options().ringSmallMessageBytes) {
    agreement_.allreduce(signature, send, recv, count, type, op);
    return;
  }
  agreement_.agree(signature);
  allreduce_.run(send, recv, count, type, op);
}

void HierarchicalCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type,
                                             int root) {
  agreement_.agree(
      makeSignature(collectiveCount(), CollectiveKind::kBroadcast, count, type, -1, root));
  mpi_.broadcast(buffer, count, type, root);
}

void HierarchicalCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                             DataType type) {
  agreement_.agree(
      makeSignature(collectiveCount(), CollectiveKind::kAllgather, countPerRank, type));
  mpi_.allgather(send, recv, countPerRank, type);
}

void HierarchicalCommunicator::barrierImpl() {
  mpi_.barrier();
}

}  // namespace ringtrain::collectives
