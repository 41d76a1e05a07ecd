// The `tuned` and `ring` backends: each all-reduce takes the algorithm that a tuning table
// (allreduce_tuning.h) gives its size, with the call checked first. `ring` is the fixed table of
// ringBackendTable.
#pragma once

#include <memory>

#include "collectives/allreduce_tuning.h"
#include "collectives/communicator.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/host_intra_node.h"
#include "collectives/mpi_communicator.h"
#include "collectives/node_topology.h"
#include "collectives/recursive_doubling.h"
#include "collectives/ring_allgather.h"
#include "collectives/ring_allreduce.h"
#include "collectives/ring_pipeline.h"

namespace ringtrain::collectives {

// Every collective starts with RecursiveDoubling's agreement on (sequence number, kind, count,
// type, op, root), so a disagreement throws CollectiveMismatchError on every rank before any data
// moves, whichever algorithms the ranks' sizes would pick. A recursive-doubling all-reduce rides
// on that exchange; the others follow it. The table is the same on every rank (rank 0 reads the
// file, agreedTuningTable). Broadcast and barrier are MPI's, all-gather the ring's.
class TunedCommunicator final : public Communicator {
 public:
  // The table of options.tuningFile, or the built-in one for this communicator's layout.
  TunedCommunicator(MPI_Comm comm, const CommunicatorOptions& options);
  // `table`, which must be the same on every rank (allreduce_perf --autotune measures with this),
  // reported as backend `name`.
  TunedCommunicator(MPI_Comm comm, const CommunicatorOptions& options, TuningTable table,
                    std::string_view name = "tuned");
  ~TunedCommunicator() override;
  std::string_view backendName() const override { return name_; }
  const TuningTable& table() const { return table_; }
  // The split all-reduce: the ring's two phases apart, for the sizes the table sends round the
  // ring; for the others reduceScatter is the table's whole all-reduce (the same bits, whichever
  // algorithm). The shards are always the ring's, so that gatherShards is always its second phase.
  bool splitsAllreduce() const override { return true; }
  ElementRange shardOfRank(std::size_t count, DataType type, int rank) const override {
    return ring_.shard(count, type, rank);
  }

 protected:
  void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op) override;
  void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) override;
  void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                     DataType type) override;
  void barrierImpl() override;
  void reduceScatterImpl(const void* send, void* recv, std::size_t count, DataType type,
                         ReduceOp op) override;
  void gatherShardsImpl(void* buffer, std::size_t count, DataType type, DataType cutAs) override;

 private:
  struct Hierarchical;  // the three-stage path, made only when the table uses it

  // The all-reduce of `signature` by `algorithm` (the table's choice for its size).
  void allreduceBy(AllreduceAlgorithm algorithm, const CallSignature& signature, const void* send,
                   void* recv, std::size_t count, DataType type, ReduceOp op);

  TuningTable table_;
  std::string_view name_;  // a literal
  RecursiveDoubling agreement_;
  RingPipeline pipeline_;
  RingAllreduce ring_;
  RingAllgather allgather_;
  MpiCommunicator mpi_;
  std::unique_ptr<Hierarchical> hierarchical_;
};

}  // namespace ringtrain::collectives
