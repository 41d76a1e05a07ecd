// The hierarchical-nccl backend (NCCL inside the node, MPI across nodes, device buffers) against
// the mpi backend's result on host buffers (GPU builds; CTest label `gpu`). The nodes are
// simulated (testRanksPerNode): 1 rank is 1 node; 2 ranks are 2 nodes x 1, which runs on one GPU
// since each node's NCCL communicator has one rank; 4 ranks are 2 nodes x 2, which needs 2 GPUs.
// Where no GPU is visible, or a simulated node has more ranks than GPUs, every test is skipped
// with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "collectives/communicator.h"
#include "collectives/cuda_check.h"
#include "base/fingerprint.h"
#include "collectives/hierarchical_communicator.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/collectives/device_test_support.h"

namespace ringtrain::testing {
namespace {

using collectives::DataType;
using collectives::ReduceOp;

// 1 and 2 ranks: one rank per node; 4 ranks: 2 x 2 (the CPU tests' split).
int ranksPerNode(int ranks) {
  return ranks >= 4 ? 2 : 1;
}

class HierarchicalNcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const std::string why = reasonToSkip("hierarchical-nccl", ranksPerNode(ranks));
    if (!why.empty()) GTEST_SKIP() << why;
    collectives::CommunicatorOptions options;
    options.test.ranksPerNode = ranksPerNode(ranks);
    comm_ = collectives::makeCommunicator("hierarchical-nccl", MPI_COMM_WORLD, options);
    reference_ = collectives::makeCommunicator("mpi", MPI_COMM_WORLD);
  }

  std::unique_ptr<collectives::Communicator> comm_;
  std::unique_ptr<collectives::Communicator> reference_;
};

TEST_F(HierarchicalNcclTest, UsesSimulatedNodesAndTakesDeviceBuffers) {
  const auto& hierarchical = dynamic_cast<const collectives::HierarchicalCommunicator&>(*comm_);
  EXPECT_EQ(comm_->backendName(), "hierarchical-nccl");
  EXPECT_TRUE(hierarchical.intraNode().takesDeviceBuffers());
  EXPECT_EQ(hierarchical.topology().largestNodeSize(),
            std::min(ranksPerNode(comm_->size()), comm_->size()));
}

TEST_F(HierarchicalNcclTest, AllreduceMatchesTheMpiBackend) {
  const int ranks = comm_->size();
  std::uint64_t seed = 7100;
  for (const DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (const ReduceOp op : collectives::kAllReduceOps) {
      // 1 Mi elements is a multiple of 16 x slices (NCCL works on the caller's buffer); the
      // others take the padded copy.
      for (const std::size_t count :
           {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(ranks) + 1, std::size_t{1009},
            std::size_t{100003}, std::size_t{1} << 20}) {
        for (const bool inPlace : {false, true}) {
          SCOPED_TRACE(::testing::Message() << name(type) << " " << name(op) << ", count " << count
                                            << (inPlace ? ", in place" : ", out of place"));
          ++seed;
          const std::size_t bytes = count * sizeOf(type);
          auto& expected = scratchBuffer(0);
          auto& result = scratchBuffer(1);
          expected.resize(bytes + 1);
          result.resize(bytes + 1);
          fillInput(type, seed, comm_->rank(), count, expected.data());
          DeviceBuffer send(bytes), recv(bytes);
          RINGTRAIN_CUDA_CHECK(
              cudaMemcpy(send.data(), expected.data(), bytes, cudaMemcpyHostToDevice));
          RINGTRAIN_CUDA_CHECK(cudaMemset(recv.data(), 0x7f, std::max<std::size_t>(bytes, 1)));
          reference_->allreduce(expected.data(), expected.data(), count, type, op);

          void* out = inPlace ? send.data() : recv.data();
          comm_->allreduce(send.data(), out, count, type, op);
          RINGTRAIN_CUDA_CHECK(cudaMemcpy(result.data(), out, bytes, cudaMemcpyDeviceToHost));

          EXPECT_EQ(countDifferences(type, op, seed, ranks, count, result.data(), expected.data()),
                    0u)
              << "on rank " << comm_->rank();
          const auto differing =
              ranksDifferingFromRankZero(fingerprint(result.data(), bytes));
          EXPECT_TRUE(differing.empty()) << "differs from rank 0's on rank " << differing.front();
        }
      }
    }
  }
}

TEST_F(HierarchicalNcclTest, BroadcastAndAllgatherDeliverEveryRanksBytes) {
  expectBroadcastAndAllgatherDeliverEveryRanksBytes(*comm_, 80);
}

TEST_F(HierarchicalNcclTest, HostBuffersAreRefusedOnEveryRank) {
  std::vector<float> host(16, 1.0f);
  EXPECT_THROW(comm_->allreduce(std::span<float>(host), ReduceOp::kSum), std::invalid_argument);
  // The communicator is still usable afterwards.
  DeviceBuffer data(16 * sizeof(float));
  RINGTRAIN_CUDA_CHECK(
      cudaMemcpy(data.data(), host.data(), 16 * sizeof(float), cudaMemcpyHostToDevice));
  comm_->allreduce(data.data(), data.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  RINGTRAIN_CUDA_CHECK(
      cudaMemcpy(host.data(), data.data(), 16 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host[15], static_cast<float>(comm_->size()));
}

}  // namespace
}  // namespace ringtrain::testing
