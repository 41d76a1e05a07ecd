// The nccl backend against the CPU result (GPU builds; CTest label `gpu`). Where no GPU is
// visible, or a node has more ranks than GPUs, every test is skipped with the reason: the backend
// was compiled and linked, not run. With 1 rank the results must equal the mpi backend's to the
// bit; with several ranks (several GPUs) min and max must, and sums within reassociation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iomanip>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "base/fingerprint.h"
#include "collectives/communicator.h"
#include "collectives/cuda_check.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/collectives/device_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::DataType;
using collectives::ReduceOp;

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = reasonToSkip("nccl", mpiEnvironment().localSize());
    if (!why.empty()) GTEST_SKIP() << why;
    comm_ = collectives::makeCommunicator("nccl", MPI_COMM_WORLD);
    reference_ = collectives::makeCommunicator("mpi", MPI_COMM_WORLD);
  }

  std::unique_ptr<collectives::Communicator> comm_;
  std::unique_ptr<collectives::Communicator> reference_;
};

TEST_F(NcclTest, AllreduceMatchesTheCpuBackend) {
  const int ranks = comm_->size();
  std::uint64_t seed = 900;
  for (const DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (const ReduceOp op : collectives::kAllReduceOps) {
      for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1009},
                                      std::size_t{100003}, std::size_t{1} << 22}) {
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
          reference_->allreduce(expected.data(), expected.data(), count, type, op);

          void* out = inPlace ? send.data() : recv.data();
          comm_->allreduce(send.data(), out, count, type, op);
          RINGTRAIN_CUDA_CHECK(cudaMemcpy(result.data(), out, bytes, cudaMemcpyDeviceToHost));

          // NCCL's average multiplies by 1/ranks (a premultiplied sum) where the CPU backends
          // divide the sum, so it may differ in the last bit; one rank's result is its input.
          const bool exact = ranks == 1 || op == ReduceOp::kMin || op == ReduceOp::kMax;
          std::size_t wrong = 0;
          std::string first;
          for (std::size_t i = 0; i < count; ++i) {
            const double got = elementAt(type, result.data(), i);
            const double want = elementAt(type, expected.data(), i);
            // Both results are within (ranks + 1) u |sum| of the exact sum (|inputs| < 1).
            const double tolerance = exact ? 0 : 2 * (ranks + 1) * unitRoundoff(type) * ranks;
            const bool bad =
                exact ? std::memcmp(result.data() + i * sizeOf(type),
                                    expected.data() + i * sizeOf(type), sizeOf(type)) != 0
                      : !(std::fabs(got - want) <= tolerance);
            if (bad && first.empty()) {
              std::ostringstream text;
              text << std::setprecision(9) << "element " << i << ": got " << got << ", want "
                   << want;
              first = text.str();
            }
            wrong += bad;
          }
          EXPECT_EQ(wrong, 0u) << "on rank " << comm_->rank() << "; first: " << first;
          const auto differing = ranksDifferingFromRankZero(fingerprint(result.data(), bytes));
          EXPECT_TRUE(differing.empty()) << "differs from rank 0's on rank " << differing.front();
        }
      }
    }
  }
}

TEST_F(NcclTest, BroadcastAndAllgatherDeliverEveryRanksBytes) {
  expectBroadcastAndAllgatherDeliverEveryRanksBytes(*comm_, 50);
}

TEST_F(NcclTest, HostBuffersAreRefusedOnEveryRank) {
  std::vector<float> host(16, 1.0f);
  EXPECT_THROW(comm_->allreduce(std::span<float>(host), ReduceOp::kSum), std::invalid_argument);
}

}  // namespace
}  // namespace ringtrain::testing
