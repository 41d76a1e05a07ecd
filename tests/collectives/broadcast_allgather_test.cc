// Broadcast from every root, all-gather in place and out of place, and barrier, on every backend.
#include <gtest/gtest.h>

#include <cstring>

#include <mpi.h>

#include "collectives/communicator.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::DataType;

class BroadcastAllgatherTest : public ::testing::TestWithParam<BackendConfig> {};

TEST_P(BroadcastAllgatherTest, BroadcastFromEveryRootDeliversTheRootsBytes) {
  auto comm = makeCommunicator(GetParam());
  for (const DataType type : collectives::kAllDataTypes) {
    for (const std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{1009}, std::size_t{1} << 20}) {
      for (int root = 0; root < comm->size(); ++root) {
        SCOPED_TRACE(::testing::Message()
                     << name(type) << ", count " << count << ", root " << root);
        const std::size_t bytes = count * sizeOf(type);
        auto& data = scratchBuffer(0);
        auto& expected = scratchBuffer(1);
        data.resize(bytes + 1);
        expected.resize(bytes + 1);
        const std::uint64_t seed = 77 + count;
        fillInput(type, seed, comm->rank(), count, data.data());
        fillInput(type, seed, root, count, expected.data());
        comm->broadcast(data.data(), count, type, root);
        EXPECT_EQ(std::memcmp(data.data(), expected.data(), bytes), 0)
            << "rank " << comm->rank() << " did not receive root " << root << "'s data";
      }
    }
  }
}

TEST_P(BroadcastAllgatherTest, AllgatherPutsEveryRanksBlockInRankOrder) {
  auto comm = makeCommunicator(GetParam());
  const auto ranks = static_cast<std::size_t>(comm->size());
  for (const DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64}) {
    for (const std::size_t perRank :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{100003}}) {
      for (const bool inPlace : {false, true}) {
        SCOPED_TRACE(::testing::Message() << name(type) << ", " << perRank << " per rank"
                                          << (inPlace ? ", in place" : ""));
        const std::size_t blockBytes = perRank * sizeOf(type);
        auto& send = scratchBuffer(0);
        auto& recv = scratchBuffer(1);
        auto& block = scratchBuffer(2);
        send.resize(blockBytes + 1);
        recv.resize(ranks * blockBytes + 1);
        block.resize(blockBytes + 1);
        std::memset(recv.data(), 0x55, ranks * blockBytes);
        std::byte* own = recv.data() + comm->rank() * blockBytes;
        fillInput(type, perRank, comm->rank(), perRank, inPlace ? own : send.data());
        comm->allgather(inPlace ? own : send.data(), recv.data(), perRank, type);
        for (std::size_t r = 0; r < ranks; ++r) {
          fillInput(type, perRank, static_cast<int>(r), perRank, block.data());
          EXPECT_EQ(std::memcmp(recv.data() + r * blockBytes, block.data(), blockBytes), 0)
              << "block of rank " << r << " wrong on rank " << comm->rank();
        }
      }
    }
  }
}

// Nobody leaves the barrier before the last rank has entered it: the last rank arrives 300 ms
// late, so every rank must spend at least about that long inside.
TEST_P(BroadcastAllgatherTest, BarrierHoldsEveryRankUntilTheLastArrives) {
  auto comm = makeCommunicator(GetParam());
  comm->barrier();  // start together
  const double start = MPI_Wtime();
  if (comm->rank() == comm->size() - 1) {
    while (MPI_Wtime() - start < 0.3) {
    }
  }
  comm->barrier();
  EXPECT_GE(MPI_Wtime() - start, 0.25) << "rank " << comm->rank() << " left the barrier early";
}

INSTANTIATE_TEST_SUITE_P(Backends, BroadcastAllgatherTest, ::testing::ValuesIn(backendConfigs()),
                         BackendConfigName());

}  // namespace
}  // namespace ringtrain::testing
