// Communicator: the collectives every backend offers (all-reduce, broadcast, all-gather, barrier).
//
// All ranks of the communicator call the same collectives in the same order with the same
// arguments (count, type, op, root); the `ring` backend checks that before moving data and throws
// CollectiveMismatchError on every rank when they disagree. Results are identical to the bit on
// every rank. A communicator is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <mpi.h>

#include "collectives/data_type.h"

namespace ringtrain::collectives {

// Thrown on every rank, with the same text, when the ranks of a collective disagree on its
// arguments (or on which collective they are in). Nothing was transferred; the communicator is
// still usable.
class CollectiveMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The defaults were chosen with build/bin/allreduce_perf on the 2-core CI machine
// (docs/collectives.md).
struct CommunicatorOptions {
  // Ring backend: all-reduces of at most this many bytes take the latency-optimal
  // recursive-doubling path; larger ones the bandwidth-optimal ring. 0 sends everything round
  // the ring (the tests use that to exercise the ring on tiny counts).
  std::size_t ringSmallMessageBytes = 32 * 1024;
  // Ring backend: each rank's segment travels in chunks of this many bytes, so that the next
  // rank can start on a chunk while this one reduces the following one. Fewer, larger messages
  // cost less per byte (~3.5 us per message here); 512 KiB balanced the two.
  std::size_t ringChunkBytes = 512 * 1024;
  // Ring backend: how many chunk receives are in flight at once.
  int ringPipelineDepth = 4;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string_view backendName() const = 0;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // How many collectives this communicator has run (the number of the next one).
  std::uint64_t collectiveCount() const { return sequence_; }

  // recv[i] = op over ranks of send[i], for i < count. send == recv reduces in place.
  void allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  // Copies root's `count` elements into every rank's buffer.
  void broadcast(void* buffer, std::size_t count, DataType type, int root);
  // recv holds size() * countPerRank elements; rank i's block lands at offset i * countPerRank.
  // send may point at this rank's own block inside recv (in place).
  void allgather(const void* send, void* recv, std::size_t countPerRank, DataType type);
  void barrier();

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
  Communicator(MPI_Comm comm);  // takes a duplicate of comm: its traffic never mixes with others'
  MPI_Comm comm() const { return comm_; }

  virtual void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                             ReduceOp op) = 0;
  virtual void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) = 0;
  virtual void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                             DataType type) = 0;
  virtual void barrierImpl() = 0;

 private:
  struct CommDeleter {
    void operator()(MPI_Comm* comm) const;
  };
  static void checkSameLength(std::size_t sendLength, std::size_t recvLength);
  void checkBuffer(const void* buffer, std::size_t count, const char* what) const;

  std::unique_ptr<MPI_Comm, CommDeleter> ownedComm_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t sequence_ = 0;
};

// Backends by name: "mpi" (MPI's own collectives) and "ring" (ringtrain's pipelined ring).
std::vector<std::string> communicatorBackends();
// Throws std::invalid_argument naming the known backends when `backend` is not one of them.
std::unique_ptr<Communicator> makeCommunicator(std::string_view backend, MPI_Comm comm,
                                               const CommunicatorOptions& options = {});

}  // namespace ringtrain::collectives
