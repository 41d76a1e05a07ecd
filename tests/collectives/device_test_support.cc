#include "tests/collectives/device_test_support.h"

#include <gtest/gtest.h>

#include <cstring>

#include <mpi.h>

#include "tests/collectives/collective_test_support.h"

namespace ringtrain::testing {

using collectives::DataType;

std::string reasonToSkip(std::string_view backend, int ranksPerGpuSet) {
  std::string why;
  const int devices = collectives::visibleCudaDevices(&why);
  const int tooFew = devices < ranksPerGpuSet ? 1 : 0;
  int fewest = devices, anyTooFew = 0;
  MPI_Allreduce(&devices, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&tooFew, &anyTooFew, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (fewest == 0) {
    return "no GPU visible" + (why.empty() ? std::string() : " (" + why + ")") + ": the " +
           std::string(backend) + " backend is compiled and linked but not run here";
  }
  if (anyTooFew) {
    return "a node has " + std::to_string(ranksPerGpuSet) +
           " ranks but a rank sees fewer GPUs; NCCL needs one GPU per rank";
  }
  return "";
}

void expectBroadcastAndAllgatherDeliverEveryRanksBytes(collectives::Communicator& comm,
                                                       std::uint64_t seed) {
  const auto ranks = static_cast<std::size_t>(comm.size());
  const DataType type = DataType::kFloat32;
  for (const std::size_t count : {std::size_t{0}, std::size_t{7}, std::size_t{100003}}) {
    SCOPED_TRACE(::testing::Message() << "count " << count);
    const std::size_t bytes = count * sizeOf(type);
    auto& host = scratchBuffer(0);
    auto& expected = scratchBuffer(1);
    host.resize(ranks * bytes + 1);
    expected.resize(ranks * bytes + 1);
    for (int root = 0; root < comm.size(); ++root) {
      fillInput(type, seed + count, comm.rank(), count, host.data());
      fillInput(type, seed + count, root, count, expected.data());
      DeviceBuffer data(bytes);
      RINGTRAIN_CUDA_CHECK(cudaMemcpy(data.data(), host.data(), bytes, cudaMemcpyHostToDevice));
      comm.broadcast(data.data(), count, type, root);
      RINGTRAIN_CUDA_CHECK(cudaMemcpy(host.data(), data.data(), bytes, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::memcmp(host.data(), expected.data(), bytes), 0) << "root " << root;
    }
    for (std::size_t r = 0; r < ranks; ++r)
      fillInput(type, seed + 10 + count, static_cast<int>(r), count, expected.data() + r * bytes);
    fillInput(type, seed + 10 + count, comm.rank(), count, host.data());
    DeviceBuffer send(bytes), recv(ranks * bytes);
    RINGTRAIN_CUDA_CHECK(cudaMemcpy(send.data(), host.data(), bytes, cudaMemcpyHostToDevice));
    comm.allgather(send.data(), recv.data(), count, type);
    RINGTRAIN_CUDA_CHECK(
        cudaMemcpy(host.data(), recv.data(), ranks * bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(host.data(), expected.data(), ranks * bytes), 0);
  }
}

}  // namespace ringtrain::testing
