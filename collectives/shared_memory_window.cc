#include "collectives/shared_memory_window.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collectives/mpi_check.h"
#include "collectives/node_topology.h"

namespace ringtrain::collectives {

namespace {

std::byte* alignUp(void* address) {
  const auto value = reinterpret_cast<std::uintptr_t>(address);
  return static_cast<std::byte*>(address) + ((64 - value % 64) % 64);
}

// A spin-wait hint: tells the core it is in a wait loop (it frees resources for a sibling
// hyper-thread, and x86 avoids the memory-order mis-speculation when the awaited line changes).
// Nothing where the processor has no such hint; the loop is correct without it.
void spinPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void requireOneNode(MPI_Comm comm, std::string_view what) {
  // Every rank gets every rank's node (an all-gather), so all reach the same verdict.
  const std::vector<int> nodes = nodeOfEachRank(comm, 0);
  std::map<int, int> ranksOnNode;
  for (const int node : nodes)
    ++ranksOnNode[node];
  if (ranksOnNode.size() == 1) return;
  int smallest = static_cast<int>(nodes.size());
  for (const auto& [node, ranks] : ranksOnNode)
    smallest = std::min(smallest, ranks);
  throw std::invalid_argument(std::string(what) + " needs all " + std::to_string(nodes.size()) +
                              " ranks on one node, but a node holds only " +
                              std::to_string(smallest) +
                              " of them; use 'ring' or 'hierarchical' across nodes");
}

void pauseOrYield(int& spins, int limit) {
  if (++spins > limit) {
    std::this_thread::yield();
  } else {
    spinPause();
  }
}

SharedMemoryWindow::SharedMemoryWindow(MPI_Comm comm, std::size_t regionBytes)
    : regionBytes_((regionBytes + 63) / 64 * 64) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
  oversubscribed_ = static_cast<unsigned>(size_) > std::thread::hardware_concurrency();
  MPI_Info info = MPI_INFO_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Info_create(&info));
  // Each rank's part where its first touch puts it, not one block on rank 0's memory.
  RINGTRAIN_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  void* base = nullptr;
  // Open MPI does not align a rank's part to a cache line; one line more lets each rank's region
  // start on one (the same offset in every process: the segments are mapped at page boundaries).
  const std::size_t bytes = regionBytes_ + 64;
  RINGTRAIN_MPI_CHECK(
      MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, info, comm, &base, &window_));
  RINGTRAIN_MPI_CHECK(MPI_Info_free(&info));

  // First touch by the owner, up front: page faults in the middle of a collective cost far more
  // than the copies (see aligned_buffer.h).
  std::memset(base, 0, bytes);
  regions_.resize(static_cast<std::size_t>(size_));
  RINGTRAIN_MPI_CHECK(MPI_Barrier(comm));  // every region zeroed before any is read
  for (int r = 0; r < size_; ++r) {
    MPI_Aint peerBytes = 0;
    int displacementUnit = 0;
    void* peerBase = nullptr;
    RINGTRAIN_MPI_CHECK(MPI_Win_shared_query(window_, r, &peerBytes, &displacementUnit, &peerBase));
    regions_[static_cast<std::size_t>(r)] = alignUp(peerBase);
  }
}

SharedMemoryWindow::~SharedMemoryWindow() {
  // MPI_Win_free waits for every rank. A rank unwinding an error must not wait there for ranks
  // that are waiting for it elsewhere: it leaves the window to the job's abort.
  if (window_ != MPI_WIN_NULL && std::uncaught_exceptions() == 0) MPI_Win_free(&window_);
}

}  // namespace ringtrain::collectives
