// Shared pieces of the GPU tests (GPU builds only): device buffers, the reason a job skips, and
// the broadcast/all-gather check every device backend must pass.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "collectives/communicator.h"
#include "collectives/cuda_check.h"

namespace ringtrain::testing {

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

// Why this job cannot run `backend` ("" when it can); the same answer on every rank. A backend
// whose NCCL communicators hold `ranksPerGpuSet` ranks of one node needs that many GPUs per rank.
std::string reasonToSkip(std::string_view backend, int ranksPerGpuSet);

// Broadcast from every root and an all-gather of device buffers (float32, counts 0, 7, 100003)
// deliver exactly the bytes sent; inputs seeded from `seed`.
void expectBroadcastAndAllgatherDeliverEveryRanksBytes(collectives::Communicator& comm,
                                                       std::uint64_t seed);

}  // namespace ringtrain::testing
