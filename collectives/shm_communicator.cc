#include "collectives/shm_communicator.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace ringtrain::collectives {

namespace {

std::unique_ptr<SharedMemoryWindow> makeWindow(MPI_Comm comm, std::size_t chunkBytes) {
  requireOneNode(comm, "backend 'shm'");
  if (chunkBytes < AlignedBuffer::kAlignment * 16) {
    throw std::invalid_argument("backend 'shm': chunk of " + std::to_string(chunkBytes) +
                                " bytes is too small (at least 1024)");
  }
  return std::make_unique<SharedMemoryWindow>(comm, 2 * chunkBytes);
}

}  // namespace

ShmCommunicator::ShmCommunicator(MPI_Comm comm, const CommunicatorOptions& options)
    : Communicator(comm, options),
      window_(makeWindow(this->comm(), options.shmChunkBytes)),
      allreduce_(std::make_unique<ShmAllreduce>(*window_, options.shmChunkBytes, waitMode())),
      ring_(comm, withoutTestFault(options)) {}

void ShmCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                                    ReduceOp op) {
  if (size() == 1) {
    if (send != recv && count > 0) std::memcpy(recv, send, count * sizeOf(type));
    return;  // an average over one rank is the value itself
  }
  // The sequence number was already advanced by Communicator::allreduce.
  allreduce_->run(makeSignature(collectiveCount(), CollectiveKind::kAllreduce, count, type,
                                static_cast<int>(op)),
                  send, recv, count, type, op);
}

void ShmCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type, int root) {
  ring_.broadcast(buffer, count, type, root);
}

void ShmCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                    DataType type) {
  ring_.allgather(send, recv, countPerRank, type);
}

void ShmCommunicator::barrierImpl() {
  ring_.barrier();
}

}  // namespace ringtrain::collectives
