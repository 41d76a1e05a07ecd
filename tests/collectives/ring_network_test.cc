// The ring backend's network chunks (ring_chunking.h) on one machine. testRanksPerNode makes
// ring neighbours "remote": 1 makes every hop a network hop; 2 mixes them (4 ranks as 2 nodes
// x 2: a rank receives shared-memory chunks from one side and sends network chunks to the other,
// or the reverse). Hops are then cut into messages of different lengths at once, and the result
// must still be the bits of the ring with one chunk length everywhere, on every rank, for the
// counts where chunk arithmetic goes wrong: 0, fewer than the ranks, not divisible by them, odd,
// and many chunks per segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/communicator.h"
#include "base/fingerprint.h"
#include "tests/collectives/collective_test_support.h"

namespace ringtrain::testing {
namespace {

using collectives::CommunicatorOptions;
using collectives::DataType;
using collectives::ReduceOp;

struct NetworkCase {
  std::string label;
  int ranksPerNode = 1;
  CommunicatorOptions options;  // without ranksPerNode: the single-chunk-length reference
  std::size_t largeCount = 0;   // a count of many network chunks per segment
};
void PrintTo(const NetworkCase& c, std::ostream* out) {
  *out << c.label;
}

// Small chunks so that small counts take many messages: the network chunk (1536 B) does not
// divide the shared-memory one (4096 B), nor the reverse, so chunk boundaries differ.
CommunicatorOptions smallChunks(std::size_t chunkBytes, std::size_t networkChunkBytes) {
  CommunicatorOptions options;
  options.ringSmallMessageBytes = 0;  // every count goes round the ring
  options.ringChunkBytes = chunkBytes;
  options.ringNetworkChunkBytes = networkChunkBytes;
  options.ringPipelineDepth = 2;
  return options;
}

std::vector<NetworkCase> networkCases() {
  return {
      {"every_hop_network", 1, smallChunks(4096, 1536), 100003},
      {"two_per_node", 2, smallChunks(4096, 1536), 100003},
      // Network chunks longer than shared-memory ones (and a receive depth of 1).
      {"two_per_node_network_longer", 2, smallChunks(1536, 4096), 100003},
      // The defaults: 512 KiB shared-memory chunks, network chunks under the TCP eager limit.
      {"every_hop_network_defaults", 1, CommunicatorOptions{}, 1000003},
      {"two_per_node_defaults", 2, CommunicatorOptions{}, 1000003},
  };
}

std::vector<std::size_t> counts(int ranks, std::size_t largeCount) {
  const auto n = static_cast<std::size_t>(ranks);
  std::vector<std::size_t> result = {0, 1, 1009, 12345 * n + 1, largeCount};
  if (ranks > 1) result.push_back(n - 1);  // fewer than the ranks
  if (ranks > 2) result.push_back(n + 1);  // not divisible
  return result;
}

std::unique_ptr<collectives::Communicator> makeRing(const CommunicatorOptions& options,
                                                    int ranksPerNode) {
  CommunicatorOptions withNodes = options;
  withNodes.test.ranksPerNode = ranksPerNode;
  return collectives::makeCommunicator("ring", MPI_COMM_WORLD, withNodes);
}

using Param = std::tuple<NetworkCase, DataType, ReduceOp>;
class RingNetworkChunksTest : public ::testing::TestWithParam<Param> {};

TEST_P(RingNetworkChunksTest, AllreduceGivesTheBitsOfOneChunkLengthOnEveryRank) {
  const auto& [networkCase, type, op] = GetParam();
  auto network = makeRing(networkCase.options, networkCase.ranksPerNode);
  auto reference = makeRing(networkCase.options, 0);  // one machine: every hop shared memory
  const std::size_t e = sizeOf(type);
  std::uint64_t seed = 7000 + 100 * static_cast<std::uint64_t>(type) + static_cast<int>(op);
  for (const std::size_t count : counts(network->size(), networkCase.largeCount)) {
    for (const bool inPlace : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (inPlace ? ", in place" : ""));
      ++seed;
      auto& input = scratchBuffer(0);
      auto& got = scratchBuffer(1);
      auto& want = scratchBuffer(2);
      for (auto* buffer : {&input, &got, &want})
        buffer->resize(std::max<std::size_t>(count * e, 1));
      fillInput(type, seed, network->rank(), count, input.data());
      reference->allreduce(input.data(), want.data(), count, type, op);
      std::memset(got.data(), 0x7f, count * e);
      if (inPlace) std::memcpy(got.data(), input.data(), count * e);
      network->allreduce(inPlace ? got.data() : input.data(), got.data(), count, type, op);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), count * e), 0)
          << "network chunks changed the result on rank " << network->rank();
      const auto differing =
          ranksDifferingFromRankZero(fingerprint(got.data(), count * e));
      EXPECT_TRUE(differing.empty())
          << "result differs from rank 0's on rank " << differing.front();
    }
  }
}

using AllgatherParam = std::tuple<NetworkCase, DataType>;
class RingNetworkAllgatherTest : public ::testing::TestWithParam<AllgatherParam> {};

TEST_P(RingNetworkAllgatherTest, PutsEveryRanksBlockInRankOrder) {
  const auto& [networkCase, type] = GetParam();
  auto network = makeRing(networkCase.options, networkCase.ranksPerNode);
  const auto ranks = static_cast<std::size_t>(network->size());
  const std::size_t e = sizeOf(type);
  for (const std::size_t perRank : counts(network->size(), networkCase.largeCount / ranks)) {
    SCOPED_TRACE(::testing::Message() << perRank << " per rank");
    auto& all = scratchBuffer(0);
    auto& block = scratchBuffer(1);
    all.resize(ranks * perRank * e + 1);
    block.resize(perRank * e + 1);
    std::memset(all.data(), 0x55, ranks * perRank * e);
    std::byte* own = all.data() + static_cast<std::size_t>(network->rank()) * perRank * e;
    fillInput(type, perRank, network->rank(), perRank, own);
    network->allgather(own, all.data(), perRank, type);
    for (std::size_t r = 0; r < ranks; ++r) {
      fillInput(type, perRank, static_cast<int>(r), perRank, block.data());
      EXPECT_EQ(std::memcmp(all.data() + r * perRank * e, block.data(), perRank * e), 0)
          << "block of rank " << r << " wrong on rank " << network->rank();
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  const auto& [networkCase, type, op] = info.param;
  return networkCase.label + "_" + std::string(name(type)) + "_" + std::string(name(op));
}

std::string allgatherName(const ::testing::TestParamInfo<AllgatherParam>& info) {
  const auto& [networkCase, type] = info.param;
  return networkCase.label + "_" + std::string(name(type));
}

// Sums and averages (the divisor is applied on the last reduce step, inside a chunk), in 2-, 4-
// and 8-byte types (cache-line rounding of the chunk lengths differs).
INSTANTIATE_TEST_SUITE_P(Chunkings, RingNetworkChunksTest,
                         ::testing::Combine(::testing::ValuesIn(networkCases()),
                                            ::testing::Values(DataType::kFloat32,
                                                              DataType::kFloat16,
                                                              DataType::kFloat64, DataType::kInt64),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kAverage)),
                         paramName);

INSTANTIATE_TEST_SUITE_P(
    Chunkings, RingNetworkAllgatherTest,
    ::testing::Combine(::testing::ValuesIn(networkCases()),
                       ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kInt64)),
    allgatherName);

}  // namespace
}  // namespace ringtrain::testing
