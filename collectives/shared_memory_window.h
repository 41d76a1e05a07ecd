// SharedMemoryWindow: memory that every rank of one node can read and write directly.
//
// Each rank owns one region of `regionBytes` (MPI_Win_allocate_shared with
// alloc_shared_noncontig, so a rank's region is placed in its own memory by its own first touch)
// and maps every peer's. Every region starts on a cache line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <mpi.h>

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
  // Collective, except while an exception unwinds (see the .cc).
  ~SharedMemoryWindow();
  SharedMemoryWindow(const SharedMemoryWindow&) = delete;
  SharedMemoryWindow& operator=(const SharedMemoryWindow&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::size_t regionBytes() const { return regionBytes_; }
  std::byte* region(int rank) const { return regions_[static_cast<std::size_t>(rank)]; }

  // How many times a wait here spins before it starts giving the core away: briefly where there
  // are more ranks on this node than cores (the peer being waited for may need this very core to
  // arrive) or where the caller shares its core with the computation, longer otherwise.
  int spinLimit(WaitMode mode) const {
    return mode == WaitMode::kYield || oversubscribed_ ? 256 : 16384;
  }

 private:
  MPI_Win window_ = MPI_WIN_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::size_t regionBytes_ = 0;
  bool oversubscribed_ = false;  // more ranks on this node than cores
  std::vector<std::byte*> regions_;
};

}  // namespace ringtrain::collectives
