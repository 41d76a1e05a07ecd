#include "collectives/tuned_communicator.h"

#include <utility>

namespace ringtrain::collectives {

struct TunedCommunicator::Hierarchical {
  Hierarchical(MPI_Comm comm, const CommunicatorOptions& options, int worldSize)
      : topology(comm, options.test.ranksPerNode),
        intraNode(topology.nodeComm(), options),
        allreduce(topology, intraNode, worldSize, options) {}
  NodeTopology topology;
  HostIntraNode intraNode;
  HierarchicalAllreduce allreduce;
};

TunedCommunicator::TunedCommunicator(MPI_Comm comm, const CommunicatorOptions& options)
    : TunedCommunicator(comm, options,
                        agreedTuningTable(comm, rankLayoutOf(comm, options.test.ranksPerNode),
                                          options.tuningFile)) {}

TunedCommunicator::TunedCommunicator(MPI_Comm comm, const CommunicatorOptions& options,
                                     TuningTable table, std::string_view name)
    : Communicator(comm, options),
      table_(std::move(table)),
      name_(name),
      agreement_(this->comm(), table_.recursiveDoublingBytes(), waitMode()),
      pipeline_(this->comm(), ringChunking(this->comm(), options), waitMode()),
      ring_(pipeline_),
      allgather_(pipeline_),
      mpi_(comm, innerOptions(options)) {
  if (table_.uses(AllreduceAlgorithm::kHierarchical))
    hierarchical_ = std::make_unique<Hierarchical>(this->comm(), innerOptions(options), size());
}

TunedCommunicator::~TunedCommunicator() = default;

void TunedCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count,
                                      DataType type, ReduceOp op) {
  const CallSignature signature = makeSignature(collectiveCount(), CollectiveKind::kAllreduce,
                                                count, type, static_cast<int>(op));
  allreduceBy(table_.choose(count * sizeOf(type)), signature, send, recv, count, type, op);
}

void TunedCommunicator::allreduceBy(AllreduceAlgorithm algorithm, const CallSignature& signature,
                                    const void* send, void* recv, std::size_t count, DataType type,
                                    ReduceOp op) {
  if (algorithm == AllreduceAlgorithm::kRecursiveDoubling) {
    agreement_.allreduce(signature, send, recv, count, type, op);
    return;
  }
  agreement_.agree(signature);
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      ring_.run(send, recv, count, type, op, RingWrites::kStreamed);
      return;
    case AllreduceAlgorithm::kRingCached:
      ring_.run(send, recv, count, type, op, RingWrites::kCached);
      return;
    case AllreduceAlgorithm::kMpi:
      mpi_.allreduce(send, recv, count, type, op);
      return;
    case AllreduceAlgorithm::kHierarchical:
      hierarchical_->allreduce.run(send, recv, count, type, op);
      return;
    case AllreduceAlgorithm::kRecursiveDoubling:
      break;
  }
}

void TunedCommunicator::reduceScatterImpl(const void* send, void* recv, std::size_t count,
                                          DataType type, ReduceOp op) {
  const CallSignature signature = makeSignature(collectiveCount(), CollectiveKind::kReduceScatter,
                                                count, type, static_cast<int>(op));
  const AllreduceAlgorithm algorithm = table_.choose(count * sizeOf(type));
  if (algorithm != AllreduceAlgorithm::kRing && algorithm != AllreduceAlgorithm::kRingCached) {
    allreduceBy(algorithm, signature, send, recv, count, type, op);
    return;
  }
  agreement_.agree(signature);
  ring_.reduceScatter(send, recv, count, type, op);
}

void TunedCommunicator::gatherShardsImpl(void* buffer, std::size_t count, DataType type,
                                         DataType cutAs) {
  agreement_.agree(makeSignature(collectiveCount(), CollectiveKind::kGatherShards, count, type));
  ring_.allgather(buffer, count, type, cutAs);
}

void TunedCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type, int root) {
  agreement_.agree(
      makeSignature(collectiveCount(), CollectiveKind::kBroadcast, count, type, -1, root));
  mpi_.broadcast(buffer, count, type, root);
}

void TunedCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                      DataType type) {
  agreement_.agree(
      makeSignature(collectiveCount(), CollectiveKind::kAllgather, countPerRank, type));
  allgather_.run(send, recv, countPerRank, type);
}

void TunedCommunicator::barrierImpl() {
  mpi_.barrier();
}

}  // namespace ringtrain::collectives
