// The `ring` backend: ringtrain's own all-reduce and all-gather, with the call checked first.
#pragma once

#include "collectives/communicator.h"
#include "collectives/mpi_communicator.h"
#include "collectives/recursive_doubling.h"
#include "collectives/ring_allgather.h"
#include "collectives/ring_allreduce.h"
#include "collectives/ring_pipeline.h"

namespace ringtrain::collectives {

// Every collective starts with RecursiveDoubling's agreement on (sequence number, kind, count,
// type, op, root): a disagreement throws CollectiveMismatchError on every rank before any data
// moves. All-reduces of at most options.ringSmallMessageBytes are done within that same exchange
// (latency-bound sizes, where a ring's 2(n-1) steps cost more than log2(n) exchanges); larger ones
// go round the ring, in chunks sized by where each ring neighbour runs (ring_chunking.h).
// Broadcast and barrier, after the check, are MPI's.
class RingCommunicator final : public Communicator {
 public:
  RingCommunicator(MPI_Comm comm, const CommunicatorOptions& options);
  std::string_view backendName() const override { return "ring"; }

 protected:
  void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op) override;
  void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) override;
  void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                     DataType type) override;
  void barrierImpl() override;

 private:
  CommunicatorOptions options_;
  RecursiveDoubling agreement_;
  RingPipeline pipeline_;
  RingAllreduce allreduce_;
  RingAllgather allgather_;
  MpiCommunicator mpi_;  // broadcast and barrier
};

}  // namespace ringtrain::collectives
