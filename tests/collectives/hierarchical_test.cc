// The hierarchical backend's own behaviour: how it splits the ranks into nodes (the real split and
// the test override), and that every split, even and uneven (1 per node, 2 per node, 3 + 1), gives
// the same results as the mpi backend: the same bits for integers and for min/max, and sums within
// reassociation for floating point. allreduce_test.cc covers every type, op and count with 2 ranks
// per node; this file varies the split.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "collectives/communicator.h"
#include "base/fingerprint.h"
#include "collectives/hierarchical_communicator.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::DataType;
using collectives::HierarchicalCommunicator;
using collectives::ReduceOp;

collectives::CommunicatorOptions splitOptions(int ranksPerNode) {
  collectives::CommunicatorOptions options;
  options.test.ranksPerNode = ranksPerNode;
  // Every size takes the three stages, in many small chunks.
  options.ringSmallMessageBytes = 0;
  options.ringChunkBytes = 4096;
  options.ringPipelineDepth = 2;
  return options;
}

TEST(HierarchicalTopology, TestOverrideMakesNodesOfConsecutiveRanks) {
  const int size = mpiEnvironment().worldSize();
  const int rank = mpiEnvironment().worldRank();
  for (const int perNode : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << perNode << " ranks per node");
    HierarchicalCommunicator comm(MPI_COMM_WORLD, splitOptions(perNode));
    const auto& topology = comm.topology();
    const int nodeFirst = rank / perNode * perNode;
    const int expectedLocalSize = std::min(perNode, size - nodeFirst);
    const int largest = std::min(perNode, size);
    EXPECT_EQ(topology.localRank(), rank - nodeFirst);
    EXPECT_EQ(topology.localSize(), expectedLocalSize);
    EXPECT_EQ(topology.largestNodeSize(), largest);
    EXPECT_EQ(topology.nodeCount(), (size + perNode - 1) / perNode);
    // Every slice has one carrier per node: a full node's rank r carries slice r, a smaller
    // node's ranks share all of them.
    std::vector<int> expectedSlices;
    for (int slice = 0; slice < largest; ++slice) {
      if (slice % expectedLocalSize == topology.localRank()) expectedSlices.push_back(slice);
    }
    std::vector<int> slices;
    for (const auto& [slice, cross] : topology.carriedSlices()) {
      slices.push_back(slice);
      int crossSize = 0;
      MPI_Comm_size(cross, &crossSize);
      EXPECT_EQ(crossSize, topology.nodeCount()) << "slice " << slice;
    }
    EXPECT_EQ(slices, expectedSlices);
  }
}

TEST(HierarchicalTopology, WithoutOverrideTheNodeIsTheSharedMemoryNode) {
  HierarchicalCommunicator comm(MPI_COMM_WORLD, splitOptions(0));
  EXPECT_EQ(comm.topology().localRank(), mpiEnvironment().localRank());
  EXPECT_EQ(comm.topology().localSize(), mpiEnvironment().localSize());
  EXPECT_EQ(comm.topology().nodeCount(), mpiEnvironment().nodeCount());
}

class HierarchicalSplitTest : public ::testing::TestWithParam<int> {};

TEST_P(HierarchicalSplitTest, MatchesTheMpiBackendAndIsBitwiseIdenticalOnEveryRank) {
  const int perNode = GetParam();
  HierarchicalCommunicator comm(MPI_COMM_WORLD, splitOptions(perNode));
  auto reference = collectives::makeCommunicator("mpi", MPI_COMM_WORLD);
  const int ranks = comm.size();
  std::uint64_t seed = 4242 + static_cast<std::uint64_t>(perNode) * 1000;
  for (const DataType type : collectives::kAllDataTypes) {
    for (const ReduceOp op : collectives::kAllReduceOps) {
      for (const std::size_t count :
           {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(ranks) + 1, std::size_t{1009},
            std::size_t{100003}}) {
        for (const bool inPlace : {false, true}) {
          SCOPED_TRACE(::testing::Message() << name(type) << " " << name(op) << ", count " << count
                                            << (inPlace ? ", in place" : ", out of place"));
          ++seed;
          const std::size_t bytes = count * sizeOf(type);
          auto& send = scratchBuffer(0);
          auto& recv = scratchBuffer(1);
          auto& expected = scratchBuffer(2);
          send.resize(bytes + 1);
          recv.resize(bytes + 1);
          expected.resize(bytes + 1);
          fillInput(type, seed, comm.rank(), count, expected.data());
          reference->allreduce(expected.data(), expected.data(), count, type, op);
          fillInput(type, seed, comm.rank(), count, send.data());
          std::memset(recv.data(), 0x7f, bytes);
          void* result = inPlace ? send.data() : recv.data();
          comm.allreduce(send.data(), result, count, type, op);

          EXPECT_EQ(countDifferences(type, op, seed, ranks, count, result, expected.data()), 0u)
              << "on rank " << comm.rank();
          const auto differing =
              ranksDifferingFromRankZero(fingerprint(result, bytes));
          EXPECT_TRUE(differing.empty())
              << "result differs from rank 0's on rank " << differing.front();
        }
      }
    }
  }
}

// 1: every rank its own node (stage 2 only); 2: 2 x 2 with 4 ranks, 2 + 1 with 3; 3: 3 + 1
// with 4 ranks, the smaller node's rank carrying all three slices.
INSTANTIATE_TEST_SUITE_P(RanksPerNode, HierarchicalSplitTest, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::to_string(param.param) + "_per_node";
                         });

}  // namespace
}  // namespace ringtrain::testing
