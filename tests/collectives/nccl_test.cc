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

#include "collectives/communicator.h"
#include "collectives/cuda_check.h"
#include "collectives/fingerprint.h"
#include "tests/collectives/collective_test_support.h"
#include "tests/support/mpi_test_environment.h"

namespace ringtrain::testing {
namespace {

using collectives::DataType;
using collectives::ReduceOp;

// cudaMalloc'd bytes, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    RINGTRAIN_CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(bytes, 1)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

// Why this job cannot run the nccl backend ("" when it can); the same answer on every rank.
std::string reasonToSkip() {
  std::string why;
  const int devices = collectives::visibleCudaDevices(&why);
  const int tooFew = devices < mpiEnvironment().localSize() ? 1 : 0;
  int fewest = devices, anyTooFew = 0;
  MPI_Allreduce(&devices, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&tooFew, &anyTooFew, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (fewest == 0) {
    return "no GPU visible" + (why.empty() ? std::string() : " (" + why + ")") +
           ": the nccl backend is compiled and linked but not run here";
  }
  if (anyTooFew) return "a node has more ranks than GPUs; NCCL needs one GPU per rank";
  return "";
}

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = reasonToSkip();
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
          // divide the sum, so even one rank's average may differ in the last bit.
          const bool exact = (ranks == 1 && op == ReduceOp::kSum) || op == ReduceOp::kMin ||
                             op == ReduceOp::kMax;
          std::size_t wrong = 0;
          std::string first;
          for (std::size_t i = 0; i < count; ++i) {
            const double got = elementAt(type, result.data(), i);
            const double want = elementAt(type, expected.data(), i);
            // Both results are within (ranks + 1) u |sum| of the exact sum (|inputs| < 1).
            const double tolerance = exact ? 0 : 2 * (ranks + 1) * unitRoundoff(type) * ranks;
            const bool bad = exact ? std::memcmp(result.data() + i * sizeOf(type),
                                                 expected.data() + i * sizeOf(type),
                                                 sizeOf(type)) != 0
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
          const auto differing =
              ranksDifferingFromRankZero(collectives::fingerprint(result.data(), bytes));
          EXPECT_TRUE(differing.empty()) << "differs from rank 0's on rank " << differing.front();
        }
      }
    }
  }
}

TEST_F(NcclTest, BroadcastAndAllgatherDeliverEveryRanksBytes) {
  const auto ranks = static_cast<std::size_t>(comm_->size());
  const DataType type = DataType::kFloat32;
  for (const std::size_t count : {std::size_t{0}, std::size_t{7}, std::size_t{100003}}) {
    SCOPED_TRACE(::testing::Message() << "count " << count);
    const std::size_t bytes = count * sizeOf(type);
    auto& host = scratchBuffer(0);
    auto& expected = scratchBuffer(1);
    host.resize(ranks * bytes + 1);
    expected.resize(ranks * bytes + 1);
    for (int root = 0; root < comm_->size(); ++root) {
      fillInput(type, 50 + count, comm_->rank(), count, host.data());
      fillInput(type, 50 + count, root, count, expected.data());
      DeviceBuffer data(bytes);
      RINGTRAIN_CUDA_CHECK(cudaMemcpy(data.data(), host.data(), bytes, cudaMemcpyHostToDevice));
      comm_->broadcast(data.data(), count, type, root);
      RINGTRAIN_CUDA_CHECK(cudaMemcpy(host.data(), data.data(), bytes, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(host.data(), expected.data(), bytes), 0) << "root " << root;
    }
    for (std::size_t r = 0; r < ranks; ++r)
      fillInput(type, 60 + count, static_cast<int>(r), count, expected.data() + r * bytes);
    fillInput(type, 60 + count, comm_->rank(), count, host.data());
    DeviceBuffer send(bytes), recv(ranks * bytes);
    RINGTRAIN_CUDA_CHECK(cudaMemcpy(send.data(), host.data(), bytes, cudaMemcpyHostToDevice));
    comm_->allgather(send.data(), recv.data(), count, type);
    RINGTRAIN_CUDA_CHECK(
        cudaMemcpy(host.data(), recv.data(), ranks * bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(host.data(), expected.data(), ranks * bytes), 0);
  }
}

TEST_F(NcclTest, HostBuffersAreRefusedOnEveryRank) {
  std::vector<float> host(16, 1.0f);
  EXPECT_THROW(comm_->allreduce(std::span<float>(host), ReduceOp::kSum), std::invalid_argument);
}

}  // namespace
}  // namespace ringtrain::testing
