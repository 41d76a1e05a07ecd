#include "training/optimizer_shards.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace ringtrain::training {
namespace {

// Calls copy(element, local, count) for each run of `index` within [begin, end): its first global
// element there, the matching local one, and how many.
template <class Copy>
void forEachOwned(const StateIndex& index, std::size_t begin, std::size_t end, Copy copy) {
  for (const StateIndex::Run& run : index.runs()) {
    const std::size_t from = std::max(run.begin, begin);
    const std::size_t to = std::min(run.end, end);
    if (from < to) copy(from, run.local + (from - run.begin), to - from);
  }
}

// The length of each of rank 0's whole state arrays (SGD without momentum has an empty one).
std::vector<std::int64_t> wholeLengths(Optimizer* whole, std::size_t arrays,
                                       collectives::Communicator& comm) {
  std::vector<std::int64_t> lengths(arrays, 0);
  if (whole) {
    const std::vector<std::span<float>> state = whole->state();
    for (std::size_t a = 0; a < arrays && a < state.size(); ++a)
      lengths[a] = static_cast<std::int64_t>(state[a].size());
  }
  comm.broadcast(std::span<std::int64_t>(lengths), 0);
  return lengths;
}

}  // namespace

void gatherShards(Optimizer& sharded, const StateIndex& index, Optimizer* whole,
                  collectives::Communicator& comm) {
  const std::vector<std::span<float>> mine = sharded.state();
  const std::vector<std::int64_t> lengths = wholeLengths(whole, mine.size(), comm);
  std::vector<std::int32_t> piece;
  for (std::size_t a = 0; a < mine.size(); ++a) {
    const auto length = static_cast<std::size_t>(lengths[a]);
    for (std::size_t begin = 0; begin < length; begin += kShardTransferElements) {
      const std::size_t end = std::min(length, begin + kShardTransferElements);
      // One rank holds each element and the others add zeros: summed as integers its bits arrive
      // unchanged (a float sum would turn -0 into +0).
      piece.assign(end - begin, 0);
      forEachOwned(index, begin, end, [&](std::size_t element, std::size_t local, std::size_t n) {
        std::memcpy(piece.data() + (element - begin), mine[a].data() + local, n * sizeof(float));
      });
      comm.allreduce(std::span<std::int32_t>(piece), collectives::ReduceOp::kSum);
      if (whole) std::memcpy(whole->state()[a].data() + begin, piece.data(), piece.size() * 4);
    }
  }
  if (whole) whole->restoreSteps(sharded.steps());
}

void scatterShards(Optimizer* whole, Optimizer& sharded, const StateIndex& index,
                   collectives::Communicator& comm) {
  const std::vector<std::span<float>> mine = sharded.state();
  const std::vector<std::int64_t> lengths = wholeLengths(whole, mine.size(), comm);
  std::vector<float> piece;
  for (std::size_t a = 0; a < mine.size(); ++a) {
    const auto length = static_cast<std::size_t>(lengths[a]);
    for (std::size_t begin = 0; begin < length; begin += kShardTransferElements) {
      const std::size_t end = std::min(length, begin + kShardTransferElements);
      piece.resize(end - begin);
      if (whole) std::copy_n(whole->state()[a].data() + begin, piece.size(), piece.data());
      comm.broadcast(std::span<float>(piece), 0);
      forEachOwned(index, begin, end, [&](std::size_t element, std::size_t local, std::size_t n) {
        std::copy_n(piece.data() + (element - begin), n, mine[a].data() + local);
      });
    }
  }
}

}  // namespace ringtrain::training
