#include "src/bench/line_round_trip.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "collectives/mpi_check.h"

namespace ringtrain::bench {

LineRoundTrip::LineRoundTrip() {
  int worldRank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &worldRank));
  RINGTRAIN_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_));
  int nodeSize = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(node_, &nodeSize));
  int paired = worldRank == 0 && nodeSize > 1;
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&paired, 1, MPI_INT, 0, MPI_COMM_WORLD));
  paired_ = paired != 0;
  // Every node builds its window (collective over the node); only rank 0's is used.
  int nodeRank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(node_, &nodeRank));
  window_ = std::make_unique<collectives::SharedMemoryWindow>(node_, nodeRank == 0 ? 64 : 0);
}

LineRoundTrip::~LineRoundTrip() {
  window_.reset();
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

double LineRoundTrip::measureNs() {
  constexpr int kGroups = 9;
  constexpr std::int64_t kTrips = 64;
  int worldRank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &worldRank));
  // World rank 0 is node rank 0 of its node (the split keeps world order); its partner is node
  // rank 1 there, whose world rank everybody learns.
  const bool pinging = paired_ && worldRank == 0;
  int partnerWorld = -1;
  if (pinging) {
    const int partnerNode = 1;
    MPI_Group nodeGroup, worldGroup;
    RINGTRAIN_MPI_CHECK(MPI_Comm_group(node_, &nodeGroup));
    RINGTRAIN_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &worldGroup));
    RINGTRAIN_MPI_CHECK(
        MPI_Group_translate_ranks(nodeGroup, 1, &partnerNode, worldGroup, &partnerWorld));
    RINGTRAIN_MPI_CHECK(MPI_Group_free(&nodeGroup));
    RINGTRAIN_MPI_CHECK(MPI_Group_free(&worldGroup));
  }
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&partnerWorld, 1, MPI_INT, 0, MPI_COMM_WORLD));
  const bool ponging = paired_ && worldRank == partnerWorld;
  std::atomic_ref<std::int64_t> line(*reinterpret_cast<std::int64_t*>(window_->region(0)));
  std::vector<double> groups;
  for (int g = 0; g < kGroups; ++g) {
    if (pinging) line.store(0);
    RINGTRAIN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const auto start = std::chrono::steady_clock::now();
    int spins = 0;
    const int limit = window_->spinLimit(collectives::WaitMode::kSpin);
    for (std::int64_t i = 0; i < kTrips && (pinging || ponging); ++i) {
      // The pinger writes odd values and waits for the next even one; the ponger answers.
      const std::int64_t awaited = pinging ? 2 * i + 2 : 2 * i + 1;
      if (pinging) line.store(2 * i + 1);
      while (line.load() != awaited)
        collectives::pauseOrYield(spins, limit);
      if (ponging) line.store(2 * i + 2);
    }
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    groups.push_back(elapsed.count() / kTrips);
    RINGTRAIN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  }
  std::nth_element(groups.begin(), groups.begin() + kGroups / 2, groups.end());
  double result = paired_ ? groups[kGroups / 2] : -1;
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&result, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return result;
}

}  // namespace ringtrain::bench
