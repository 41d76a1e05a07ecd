// SharedMemoryWindow: memory that every rank of one node can read and write directly, and the
// arrival counters the shared-memory collectives synchronise on.
//
// Each rank owns one region of `regionBytes` (MPI_Win_allocate_shared with
// alloc_shared_noncontig, so a rank's region is placed in its own memory by its own first touch)
// and maps every peer's. Ahead of each region sit a few cache lines of control: an arrival
// counter, and two call signatures (one per parity of the round, see ShmAllreduce), each on a
// line of its own so that a rank writing its counter never invalidates a line a peer polls for
// something else.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <mpi.h>

#include "collectives/call_signature.h"
#include "collectives/request_wait.h"

namespace ringtrain::collectives {

// Throws std::invalid_argument on every rank of `comm`, with the same text, unless all of them
// share one node's memory; `what` names the feature that needs it ("backend 'shm'").
void requireOneNode(MPI_Comm comm, std::string_view what);

// One look at a flag another process of this node sets: a pause while `spins` is below `limit`
// (a peer on another core usually answers within microseconds), then a yield of the core.
void pauseOrYield(int& spins, int limit);

class SharedMemoryWindow {
 public:
  // Collective over `comm`, whose ranks must all share this node's memory (the caller checks).
  // `regionBytes` is this rank's region; ranks may ask for different sizes.
  SharedMemoryWindow(MPI_Comm comm, std::size_t regionBytes);
  ~SharedMemoryWindow();
  SharedMemoryWindow(const SharedMemoryWindow&) = delete;
  SharedMemoryWindow& operator=(const SharedMemoryWindow&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::size_t regionBytes() const { return regionBytes_; }
  std::byte* region(int rank) const { return peers_[static_cast<std::size_t>(rank)].data; }

  CallSignature& signature(int rank, int parity) const {
    return peers_[static_cast<std::size_t>(rank)].control->signatures[parity].value;
  }

  // How many times a wait here spins before it starts giving the core away: briefly where there
  // are more ranks on this node than cores (the peer being waited for may need this very core to
  // arrive) or where the caller shares its core with the computation, longer otherwise.
  int spinLimit(WaitMode mode) const {
    return mode == WaitMode::kYield || oversubscribed_ ? 256 : 16384;
  }

  // Arrival `epoch` (counted from 1 by the caller, the same on every rank): publishes everything
  // this rank wrote before (ordinary and non-temporal stores alike), then waits until every rank
  // has arrived at `epoch` too, by spinning briefly and then, in WaitMode::kYield, giving the core
  // away between looks. Whatever a peer wrote before its arrival is visible afterwards.
  void arriveAndWait(std::uint64_t epoch, WaitMode mode) const;

 private:
  struct alignas(64) SignatureLine {
    CallSignature value;
  };
  struct Control {
    alignas(64) std::atomic<std::uint64_t> arrived{0};
    SignatureLine signatures[2];
  };
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
                "arrival counters are shared between processes: they must be lock-free");
  struct Peer {
    Control* control = nullptr;
    std::byte* data = nullptr;
  };
  static constexpr std::size_t kControlBytes = (sizeof(Control) + 63) / 64 * 64;

  MPI_Win window_ = MPI_WIN_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::size_t regionBytes_ = 0;
  bool oversubscribed_ = false;  // more ranks on this node than cores
  std::vector<Peer> peers_;
};

}  // namespace ringtrain::collectives
