// The `mpi` backend: MPI's own collectives, the reference every other backend is measured against.
#pragma once

#include <array>

#include "collectives/communicator.h"

namespace ringtrain::collectives {

// MPI has no float16 or bfloat16 reductions, so those travel as 2-byte MPI datatypes with
// user-defined ops (created once per communicator) that compute in float32. Average is MPI_SUM
// followed by a local division: every rank divides the same bits by the same number.
// Counts above INT_MAX are sent in several calls. With yieldWhileWaiting it uses MPI's
// non-blocking collectives and waits politely (Open MPI's blocking ones spin).
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, const CommunicatorOptions& options);
  ~MpiCommunicator() override;
  std::string_view backendName() const override { return "mpi"; }

 protected:
  void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op) override;
  void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) override;
  void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                     DataType type) override;
  void barrierImpl() override;

 private:
  // Runs a blocking collective, or its non-blocking twin followed by a polite wait.
  template <class Blocking, class NonBlocking>
  void run(Blocking blocking, NonBlocking nonBlocking);
  // With CommunicatorOptions::mpiAgreement: returns if every rank calls what this one does,
  // else throws CollectiveMismatchError naming the first rank that differs from rank 0.
  void agree(CollectiveKind kind, std::size_t count, DataType type, int op = -1, int root = -1);
  MPI_Datatype mpiType(DataType type) const;
  MPI_Op mpiOp(DataType type, ReduceOp op) const;

  MPI_Datatype float16Type_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16Type_ = MPI_DATATYPE_NULL;
  // [float16, bfloat16] x [sum, min, max]
  std::array<std::array<MPI_Op, 3>, 2> halfOps_{};
};

}  // namespace ringtrain::collectives
