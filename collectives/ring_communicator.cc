#include "collectives/ring_communicator.h"

namespace ringtrain::collectives {
RingCommunicator::RingCommunicator(MPI_Comm comm, const CommunicatorOptions& options)
    : Communicator(comm, options),
      options_(options),
      agreement_(this->comm(), options.ringSmallMessageBytes, waitMode()),
      pipeline_(this->comm(), ringChunking(this->comm(), options), waitMode()),
      allreduce_(pipeline_),
      allgather_(pipeline_),
      mpi_(comm, withoutTestFault(options)) {}

void RingCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                                     ReduceOp op) {
  // The sequence number was already advanced by Communicator::allreduce.
  const CallSignature signature = makeSignature(collectiveCount(), CollectiveKind::kAllreduce,
                                                count, type, static_cast<int>(op));
  if (count * sizeOf(type) <= options_.ringSmallMessageBytes) {
    agreement_.allreduce(signature, send, recv, count, type, op);
    return;
  }
  agreement_.agree(signature);
  allreduce_.run(send, recv, count, type, op);
}

void RingCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type, int root) {
  agreement_.agree(
      makeSignature(collectiveCount(), CollectiveKind::kBroadcast, count, type, -1, root));
  mpi_.broadcast(buffer, count, type, root);
}

void RingCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                     DataType type) {
  agreement_.agree(
      makeSignature(collectiveCount(), CollectiveKind::kAllgather, countPerRank, type));
  allgather_.run(send, recv, countPerRank, type);
}

void RingCommunicator::barrierImpl() {
  mpi_.barrier();
}

}  // namespace ringtrain::collectives
