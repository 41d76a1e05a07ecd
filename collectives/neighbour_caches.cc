#include "collectives/neighbour_caches.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <vector>

#include "collectives/mpi_check.h"
#include "collectives/node_topology.h"
#include "collectives/shared_memory_window.h"

namespace ringtrain::collectives {

NeighbourCacheProbe::NeighbourCacheProbe(MPI_Comm comm, WaitMode waitMode) : waitMode_(waitMode) {
  const std::vector<int> nodes = nodeOfEachRank(comm, 0);
  const bool oneNode = std::all_of(nodes.begin(), nodes.end(),
                                   [&](int node) { return node == nodes.front(); });
  if (oneNode && nodes.size() > 1) window_ = std::make_unique<SharedMemoryWindow>(comm, 64);
}

NeighbourCacheProbe::~NeighbourCacheProbe() = default;

NeighbourCaches NeighbourCacheProbe::update() {
  if (window_ && calls_++ % kEveryCalls == 0) guess_ = fromRoundTripNs(measureRoundTripNs());
  return guess_;
}

// Every rank bounces its own line off its right neighbour while bouncing its left neighbour's
// line back: it writes an odd value into its line, waits for the left neighbour's odd value and
// answers it with the next even one, then waits for its right neighbour's answer. Each line has
// exactly two writers taking turns, so no write is lost. The median of a few groups of trips.
double NeighbourCacheProbe::measureRoundTripNs() {
  if (!window_) return -1;
  constexpr int kGroups = 3;
  constexpr int kTrips = 16;
  const int n = window_->size();
  std::atomic_ref<std::int64_t> mine(
      *reinterpret_cast<std::int64_t*>(window_->region(window_->rank())));
  std::atomic_ref<std::int64_t> left(
      *reinterpret_cast<std::int64_t*>(window_->region((window_->rank() - 1 + n) % n)));
  const int limit = window_->spinLimit(waitMode_);
  std::array<double, kGroups> groups{};
  for (double& group : groups) {
    const auto start = std::chrono::steady_clock::now();
    for (int trip = 0; trip < kTrips; ++trip) {
      const std::int64_t ping = lastValue_ + 1;
      const std::int64_t pong = lastValue_ + 2;
      lastValue_ = pong;
      mine.store(ping);
      int spins = 0;
      while (left.load() != ping)
        pauseOrYield(spins, limit);
      left.store(pong);
      while (mine.load() != pong)
        pauseOrYield(spins, limit);
    }
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    group = elapsed.count() / kTrips;
  }
  std::nth_element(groups.begin(), groups.begin() + kGroups / 2, groups.end());
  return groups[kGroups / 2];
}

}  // namespace ringtrain::collectives
