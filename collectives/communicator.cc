#include "collectives/communicator.h"

#include <unistd.h>

#include <chrono>
#include <exception>
#include <thread>

#include "collectives/hierarchical_communicator.h"
#include "collectives/mpi_check.h"
#include "collectives/mpi_communicator.h"
#include "collectives/tuned_communicator.h"
#ifdef RINGTRAIN_HAVE_NCCL
#include "collectives/nccl_communicator.h"
#include "collectives/nccl_intra_node.h"
#endif

namespace ringtrain::collectives {

void Communicator::CommDeleter::operator()(MPI_Comm* comm) const {
  // Freeing is collective; a rank unwinding an error leaves it to the job's abort rather than
  // wait for ranks that wait for it elsewhere.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && std::uncaught_exceptions() == 0) MPI_Comm_free(comm);
  delete comm;
}

void CommunicatorTestHooks::stall(const std::string& what) const {
  if (stallSeconds > 0) {
    logLine(LogLevel::kWarn, "test fault: not taking part in " + what + " for " +
                                 std::to_string(stallSeconds) + " s");
    std::this_thread::sleep_for(std::chrono::seconds(stallSeconds));
    return;
  }
  logLine(LogLevel::kWarn, "test fault: not taking part in " + what + "; waiting for ever instead");
  for (;;)
    ::sleep(1);
}

Communicator::Entered::Entered(Communicator& comm, CollectiveKind kind, std::size_t count,
                               DataType type)
    : comm_(comm) {
  const std::uint64_t number = comm.sequence_.load(std::memory_order_relaxed) + 1;
  if (comm.options_.test.stallsIn(comm.rank_, number)) {
    comm.options_.test.stall("collective #" + std::to_string(number));
  }
  comm.kind_.store(static_cast<int>(kind), std::memory_order_relaxed);
  comm.count_.store(count, std::memory_order_relaxed);
  comm.type_.store(static_cast<int>(type), std::memory_order_relaxed);
  comm.sequence_.store(number, std::memory_order_release);
  comm.inside_.store(true, std::memory_order_release);
}

Communicator::Entered::~Entered() {
  comm_.inside_.store(false, std::memory_order_release);
}

CollectiveProgress Communicator::progress() const {
  CollectiveProgress p;
  p.inside = inside_.load(std::memory_order_acquire);
  p.sequence = sequence_.load(std::memory_order_acquire);
  p.kind = static_cast<CollectiveKind>(kind_.load(std::memory_order_relaxed));
  p.count = count_.load(std::memory_order_relaxed);
  p.type = static_cast<DataType>(type_.load(std::memory_order_relaxed));
  return p;
}

Communicator::Communicator(MPI_Comm comm, const CommunicatorOptions& options)
    : ownedComm_(new MPI_Comm(MPI_COMM_NULL)), options_(options) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(comm, ownedComm_.get()));
  comm_ = *ownedComm_;
  RINGTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

void Communicator::checkSameLength(std::size_t sendLength, std::size_t recvLength) {
  if (sendLength != recvLength) {
    throw std::invalid_argument("all-reduce: send has " + std::to_string(sendLength) +
                                " elements but recv has " + std::to_string(recvLength));
  }
}

void Communicator::checkBuffer(const void* buffer, std::size_t count, const char* what) const {
  if (buffer == nullptr && count > 0) {
    throw std::invalid_argument(std::string(what) + ": null buffer for " + std::to_string(count) +
                                " elements");
  }
}

void Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType type,
                             ReduceOp op) {
  checkBuffer(send, count, "all-reduce");
  checkBuffer(recv, count, "all-reduce");
  const Entered entered(*this, CollectiveKind::kAllreduce, count, type);
  allreduceImpl(send, recv, count, type, op);
}

void Communicator::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  checkBuffer(buffer, count, "broadcast");
  if (root < 0 || root >= size_) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) +
                                " is not a rank of this communicator (size " +
                                std::to_string(size_) + ")");
  }
  const Entered entered(*this, CollectiveKind::kBroadcast, count, type);
  broadcastImpl(buffer, count, type, root);
}

void Communicator::allgather(const void* send, void* recv, std::size_t countPerRank,
                             DataType type) {
  checkBuffer(send, countPerRank, "all-gather");
  checkBuffer(recv, countPerRank, "all-gather");
  const Entered entered(*this, CollectiveKind::kAllgather, countPerRank, type);
  allgatherImpl(send, recv, countPerRank, type);
}

void Communicator::barrier() {
  const Entered entered(*this, CollectiveKind::kBarrier, 0, DataType::kFloat32);
  barrierImpl();
}

void Communicator::reduceScatter(const void* send, void* recv, std::size_t count, DataType type,
                                 ReduceOp op) {
  checkBuffer(send, count, "reduce-scatter");
  checkBuffer(recv, count, "reduce-scatter");
  const Entered entered(*this, CollectiveKind::kReduceScatter, count, type);
  reduceScatterImpl(send, recv, count, type, op);
}

void Communicator::gatherShards(void* buffer, std::size_t count, DataType type, DataType cutAs) {
  checkBuffer(buffer, count, "shard all-gather");
  const Entered entered(*this, CollectiveKind::kGatherShards, count, type);
  gatherShardsImpl(buffer, count, type, cutAs);
}

namespace {
[[noreturn]] void cannotSplit(std::string_view backend) {
  throw std::logic_error("backend " + std::string(backend) +
                         " cannot split its all-reduce (reduce-scatter, shard all-gather)");
}
}  // namespace

ElementRange Communicator::shardOfRank(std::size_t /*count*/, DataType /*type*/,
                                       int /*rank*/) const {
  cannotSplit(backendName());
}

void Communicator::reduceScatterImpl(const void* /*send*/, void* /*recv*/, std::size_t /*count*/,
                                     DataType /*type*/, ReduceOp /*op*/) {
  cannotSplit(backendName());
}

void Communicator::gatherShardsImpl(void* /*buffer*/, std::size_t /*count*/, DataType /*type*/,
                                    DataType /*cutAs*/) {
  cannotSplit(backendName());
}

std::string_view name(Backend backend) {
  return nameIn(kBackendNames, backend);
}

std::optional<Backend> backendFromName(std::string_view name) {
  return valueIn(kBackendNames, name);
}

bool isDeviceBackend(Backend backend) {
  return backend == Backend::kNccl || backend == Backend::kHierarchicalNccl;
}

std::vector<Backend> hostBackends() {
  return {Backend::kMpi, Backend::kRing, Backend::kTuned, Backend::kHierarchical};
}

std::vector<Backend> deviceBackends() {
  return {Backend::kNccl, Backend::kHierarchicalNccl};
}

std::string joinNames(std::span<const Backend> backends) {
  std::string names;
  for (const Backend backend : backends)
    names += (names.empty() ? "" : ", ") + std::string(name(backend));
  return names;
}

CommunicatorOptions innerOptions(CommunicatorOptions options) {
  options.test.stallRank = -1;
  options.mpiAgreement = false;
  return options;
}

std::unique_ptr<Communicator> makeCommunicator(Backend backend, MPI_Comm comm,
                                               const CommunicatorOptions& options) {
  switch (backend) {
    case Backend::kMpi:
      return std::make_unique<MpiCommunicator>(comm, options);
    case Backend::kRing:
      return std::make_unique<TunedCommunicator>(
          comm, options, ringBackendTable(options.ringSmallMessageBytes), "ring");
    case Backend::kTuned:
      return std::make_unique<TunedCommunicator>(comm, options);
    case Backend::kHierarchical:
      return std::make_unique<HierarchicalCommunicator>(comm, options);
    case Backend::kNccl:
    case Backend::kHierarchicalNccl:
      break;
  }
    // The one place that knows whether this build has the GPU path.
#ifdef RINGTRAIN_HAVE_NCCL
  if (backend == Backend::kNccl) return std::make_unique<NcclCommunicator>(comm, options);
  return std::make_unique<HierarchicalCommunicator>(comm, options, "hierarchical-nccl",
                                                    makeNcclIntraNode);
#else
  throw std::invalid_argument("backend '" + std::string(name(backend)) +
                              "' needs a build with CUDA and NCCL; this one was configured "
                              "without them (RINGTRAIN_CUDA=OFF, or CMake found no CUDA "
                              "toolkit/NCCL)");
#endif
}

std::unique_ptr<Communicator> makeCommunicator(std::string_view backendName, MPI_Comm comm,
                                               const CommunicatorOptions& options) {
  const std::optional<Backend> backend = backendFromName(backendName);
  if (!backend) {
    throw std::invalid_argument("unknown backend '" + std::string(backendName) +
                                "' (known: " + joinNames(hostBackends()) +
                                "; for device buffers: " + joinNames(deviceBackends()) + ")");
  }
  return makeCommunicator(*backend, comm, options);
}

}  // namespace ringtrain::collectives
