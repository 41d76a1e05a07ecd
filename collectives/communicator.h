// Communicator: the collectives every backend offers (all-reduce, broadcast, all-gather, barrier).
//
// All ranks of the communicator call the same collectives in the same order with the same
// arguments (count, type, op, root); the `ring` backend checks that before moving data and throws
// CollectiveMismatchError on every rank when they disagree. Results are identical to the bit on
// every rank. A communicator is used by one thread at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <mpi.h>

#include "base/named_values.h"
#include "collectives/call_signature.h"
#include "collectives/data_type.h"
#include "collectives/request_wait.h"

namespace ringtrain::collectives {

// Thrown on every rank, with the same text, when the ranks of a collective disagree on its
// arguments (or on which collective they are in). Nothing was transferred; the communicator is
// still usable.
class CollectiveMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Test-only settings of a communicator, gathered here so that production code sets none of them.
struct CommunicatorTestHooks {
  // Rank stallRank does not take part in collective number stallCollective (counted from 1) and
  // waits for ever instead, as a rank stuck elsewhere would. The stall watchdog's tests use it.
  int stallRank = -1;
  std::uint64_t stallCollective = 0;
  int stallSeconds = 0;  // > 0: the rank waits this long, then takes part (a slow rank)
  // Hierarchical and ring backends, tests and benchmarks only: every ranksPerNode consecutive
  // ranks form one "node" instead of the ranks that really share a node (MPI_COMM_TYPE_SHARED),
  // so that one machine can stand in for several nodes (4 ranks as 2 x 2, 3 ranks as 2 + 1; 1
  // makes every ring neighbour a network one). 0: the real nodes. Never set it in production:
  // the slices would cross real node boundaries in the wrong places.
  int ranksPerNode = 0;

  bool stallsIn(int rank, std::uint64_t collective) const {
    return rank == stallRank && collective == stallCollective;
  }
  // Says "test fault: not taking part in <what>" and waits as stallSeconds says.
  void stall(const std::string& what) const;
};

// The defaults and how to tune them: docs/collectives.md (allreduce_perf).
struct CommunicatorOptions {
  // Ring backend: all-reduces of at most this many bytes take the latency-optimal
  // recursive-doubling path; larger ones the bandwidth-optimal ring. 0 sends everything round
  // the ring (the tests use that to exercise the ring on tiny counts).
  std::size_t ringSmallMessageBytes = 32 * 1024;
  // Ring backend: each rank's segment travels in chunks of this many bytes, so that the next
  // rank can start on a chunk while this one reduces the following one; larger chunks mean fewer
  // messages, smaller ones an earlier start.
  std::size_t ringChunkBytes = 512 * 1024;
  // Ring backend: the chunk size of messages to and from a ring neighbour on another node (0:
  // ringChunkBytes). Open MPI's TCP transport sends a message of up to 64 KiB, its header
  // included, eagerly; a larger one waits for the receiver's go-ahead, which between two hosts
  // queues behind the other direction's data. 64 KiB less 256 bytes leaves room for the header
  // (see ring_chunking.h).
  std::size_t ringNetworkChunkBytes = 64 * 1024 - 256;
  // Ring backend: how many chunk receives are in flight at once (in chunks of ringChunkBytes;
  // receives of smaller network chunks keep as many bytes in flight).
  int ringPipelineDepth = 4;
  // Wait for messages by testing and yielding the processor instead of spinning: for a
  // communication thread that shares its core with the computation (see request_wait.h).
  bool yieldWhileWaiting = false;
  // Mpi backend: compare every call's signature first (one all-reduce of 16 bytes), so that
  // ranks that disagree get CollectiveMismatchError instead of MPI's undefined behaviour. The
  // other host backends always compare, inside their first exchange.
  bool mpiAgreement = false;
  // Tuned backend: the tuning table allreduce_perf --autotune wrote (allreduce_tuning.h); empty:
  // the built-in table.
  std::string tuningFile;
  CommunicatorTestHooks test;
};

// The options of a communicator that runs inside another one's collectives: the test fault and
// the agreement belong to the outer one's calls alone.
CommunicatorOptions innerOptions(CommunicatorOptions options);

// Elements [begin, end) of a buffer.
struct ElementRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
};

// What a communicator is doing, as another thread (the stall watchdog) can read it.
struct CollectiveProgress {
  std::uint64_t sequence = 0;  // number of the last collective entered (0: none yet)
  bool inside = false;         // still inside it
  CollectiveKind kind = CollectiveKind::kAllreduce;
  std::uint64_t count = 0;
  DataType type = DataType::kFloat32;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string_view backendName() const = 0;
  // Device backends: the GPU this rank's buffers must live on, and the stream (a cudaStream_t)
  // whose queued work each collective waits for on the device. Host backends: -1 and nothing.
  virtual int device() const { return -1; }
  virtual void setComputeStream(void* /*stream*/) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  // How many collectives this communicator has entered (the number of the current one).
  std::uint64_t collectiveCount() const { return sequence_.load(std::memory_order_relaxed); }
  // A snapshot that may be taken from any thread.
  CollectiveProgress progress() const;

  // recv[i] = op over ranks of send[i], for i < count. send == recv reduces in place.
  void allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  // Copies root's `count` elements into every rank's buffer.
  void broadcast(void* buffer, std::size_t count, DataType type, int root);
  // recv holds size() * countPerRank elements; rank i's block lands at offset i * countPerRank.
  // send may point at this rank's own block inside recv (in place).
  void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type);
  void barrier();

  // The all-reduce in its two halves, for ZeRO-1 (backends whose splitsAllreduce() is true; the
  // others throw std::logic_error). reduceScatter leaves in recv this rank's shard only,
  // shardOf(count, type), holding the very bits allreduce of the same arguments would leave
  // there; the rest of recv is scratch. gatherShards then copies every rank's shard of `buffer`
  // (`count` elements of `type`, cut as shardOf(count, cutAs) cuts a buffer of `cutAs`, the
  // reduce-scatter's type) to every rank. Together they move the bytes of one all-reduce.
  virtual bool splitsAllreduce() const { return false; }
  ElementRange shardOf(std::size_t count, DataType type) const {
    return shardOfRank(count, type, rank_);
  }
  // The shard that rank `rank` is left with: every rank can work out every rank's.
  virtual ElementRange shardOfRank(std::size_t count, DataType type, int rank) const;
  void reduceScatter(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  void gatherShards(void* buffer, std::size_t count, DataType type, DataType cutAs);

  template <class T>
  void allreduce(std::span<T> data, ReduceOp op) {
    allreduce(data.data(), data.data(), data.size(), dataTypeOf<T>(), op);
  }
  template <class T>
  void allreduce(std::span<const T> send, std::span<T> recv, ReduceOp op) {
    checkSameLength(send.size(), recv.size());
    allreduce(send.data(), recv.data(), send.size(), dataTypeOf<T>(), op);
  }
  template <class T>
  void broadcast(std::span<T> data, int root) {
    broadcast(data.data(), data.size(), dataTypeOf<T>(), root);
  }

 protected:
  // Takes a duplicate of comm: its traffic never mixes with others'.
  Communicator(MPI_Comm comm, const CommunicatorOptions& options);
  MPI_Comm comm() const { return comm_; }
  const CommunicatorOptions& options() const { return options_; }
  WaitMode waitMode() const {
    return options_.yieldWhileWaiting ? WaitMode::kYield : WaitMode::kSpin;
  }

  virtual void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                             ReduceOp op) = 0;
  virtual void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) = 0;
  virtual void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                             DataType type) = 0;
  virtual void barrierImpl() = 0;
  virtual void reduceScatterImpl(const void* send, void* recv, std::size_t count, DataType type,
                                 ReduceOp op);
  virtual void gatherShardsImpl(void* buffer, std::size_t count, DataType type, DataType cutAs);

 private:
  struct CommDeleter {
    void operator()(MPI_Comm* comm) const;
  };
  static void checkSameLength(std::size_t sendLength, std::size_t recvLength);
  void checkBuffer(const void* buffer, std::size_t count, const char* what) const;

  // Marks the communicator as inside a collective for its lifetime; honours the test fault.
  class Entered {
   public:
    Entered(Communicator& comm, CollectiveKind kind, std::size_t count, DataType type);
    ~Entered();
    Entered(const Entered&) = delete;
    Entered& operator=(const Entered&) = delete;

   private:
    Communicator& comm_;
  };

  std::unique_ptr<MPI_Comm, CommDeleter> ownedComm_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  CommunicatorOptions options_;
  int rank_ = 0;
  int size_ = 1;
  std::atomic<std::uint64_t> sequence_{0};
  std::atomic<bool> inside_{false};
  std::atomic<int> kind_{0};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<int> type_{0};
};

// The backends: kMpi (MPI's own collectives), kRing (ringtrain's pipelined ring), kTuned (per
// all-reduce size the algorithm a tuning table gives: tuned_communicator.h),
// kHierarchical (reduce-scatter inside the node, all-reduce across nodes, all-gather inside the
// node; see hierarchical_allreduce.h) for host buffers; kNccl (nccl_communicator.h) and
// kHierarchicalNccl (the hierarchical backend with NCCL inside the node) for device buffers,
// made only by builds with CUDA and NCCL.
enum class Backend { kMpi, kRing, kTuned, kHierarchical, kNccl, kHierarchicalNccl };

// The one table of the backends' names.
inline constexpr NamedValue<Backend> kBackendNames[] = {
    {Backend::kMpi, "mpi"},     {Backend::kRing, "ring"},
    {Backend::kTuned, "tuned"}, {Backend::kHierarchical, "hierarchical"},
    {Backend::kNccl, "nccl"},   {Backend::kHierarchicalNccl, "hierarchical-nccl"},
};
std::string_view name(Backend backend);
std::optional<Backend> backendFromName(std::string_view name);
bool isDeviceBackend(Backend backend);
// The host backends, then the device ones (listed in every build).
std::vector<Backend> hostBackends();
std::vector<Backend> deviceBackends();
// "mpi, ring, hierarchical": for messages that list the choices.
std::string joinNames(std::span<const Backend> backends);

// Makes `backend`. Throws std::invalid_argument when it is a device backend in a build without
// the GPU path.
std::unique_ptr<Communicator> makeCommunicator(Backend backend, MPI_Comm comm,
                                               const CommunicatorOptions& options = {});
// The same by name, for programs that take it from their command line: also throws
// std::invalid_argument naming the known backends when `name` is none of them.
std::unique_ptr<Communicator> makeCommunicator(std::string_view name, MPI_Comm comm,
                                               const CommunicatorOptions& options = {});

}  // namespace ringtrain::collectives
