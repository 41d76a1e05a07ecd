// The `shm` backend: all-reduce through memory shared by the ranks of one node (ShmAllreduce),
// for jobs whose ranks all run on one machine. Broadcast, all-gather and barrier are the `ring`
// backend's (checked first, then MPI's or the ring's).
#pragma once

#include <memory>

#include "collectives/communicator.h"
#include "collectives/ring_communicator.h"
#include "collectives/shared_memory_window.h"
#include "collectives/shm_allreduce.h"

namespace ringtrain::collectives {

// Construction is collective. It throws std::invalid_argument on every rank, with the same text,
// when the ranks do not all share one node (a job across nodes wants `ring` or `hierarchical`).
class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(MPI_Comm comm, const CommunicatorOptions& options);
  std::string_view backendName() const override { return "shm"; }

 protected:
  void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op) override;
  void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) override;
  void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                     DataType type) override;
  void barrierImpl() override;

 private:
  std::unique_ptr<SharedMemoryWindow> window_;
  std::unique_ptr<ShmAllreduce> allreduce_;
  RingCommunicator ring_;  // broadcast, all-gather, barrier
};

}  // namespace ringtrain::collectives
