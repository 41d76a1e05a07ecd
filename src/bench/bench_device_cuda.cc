#include <stdexcept>

#include <cuda_runtime_api.h>

#include "collectives/cuda_check.h"
#include "src/bench/bench_device.h"

namespace ringtrain::bench {

int selectDevice(int localRank, std::string* name) {
  std::string why;
  const int devices = collectives::visibleCudaDevices(&why);
  if (devices == 0) throw std::runtime_error("--device cuda: no GPU visible (" + why + ")");
  const int device = localRank % devices;
  RINGTRAIN_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp properties{};
  RINGTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  if (name != nullptr) *name = properties.name;
  return device;
}

DeviceBytes::DeviceBytes(std::size_t bytes) {
  RINGTRAIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes));
}

DeviceBytes::~DeviceBytes() {
  cudaFree(data_);
}

void copyToDevice(void* device, const void* host, std::size_t bytes) {
  RINGTRAIN_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
}

void copyToHost(void* host, const void* device, std::size_t bytes) {
  RINGTRAIN_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}

double deviceCopyBandwidth(const std::byte* source, std::byte* destination, std::size_t bytes,
                           int warmup, int iters) {
  for (int i = 0; i < warmup; ++i)
    RINGTRAIN_CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice));
  cudaEvent_t start = nullptr, stop = nullptr;
  RINGTRAIN_CUDA_CHECK(cudaEventCreate(&start));
  RINGTRAIN_CUDA_CHECK(cudaEventCreate(&stop));
  RINGTRAIN_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i)
    RINGTRAIN_CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice));
  RINGTRAIN_CUDA_CHECK(cudaEventRecord(stop));
  RINGTRAIN_CUDA_CHECK(cudaEventSynchronize(stop));
  float milliseconds = 0;
  RINGTRAIN_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start, stop));
  RINGTRAIN_CUDA_CHECK(cudaEventDestroy(start));
  RINGTRAIN_CUDA_CHECK(cudaEventDestroy(stop));
  const double seconds = static_cast<double>(milliseconds) / 1e3 / iters;
  return seconds > 0 ? 2.0 * static_cast<double>(bytes) / seconds : 0.0;
}

}  // namespace ringtrain::bench
