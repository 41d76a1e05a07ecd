// What allreduce_perf needs from a GPU, behind one interface: bench_device_cuda.cc in builds with
// the GPU path, bench_device_none.cc (every call refuses) in CPU-only builds.
#pragma once

#include <cstddef>
#include <string>

namespace ringtrain::bench {

// Makes GPU `localRank % device count` current and returns its index; `name` gets its name.
// Throws std::runtime_error when no GPU is visible or the build has no GPU path.
int selectDevice(int localRank, std::string* name);

// cudaMalloc'd bytes on the current GPU, freed on scope exit.
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes);
  ~DeviceBytes();
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
};

void copyToDevice(void* device, const void* host, std::size_t bytes);
void copyToHost(void* host, const void* device, std::size_t bytes);

// Device-to-device cudaMemcpy of `bytes` bytes from `source` to `destination`: `warmup`
// untimed copies, then `iters` timed with CUDA events; returns the bytes read plus written per
// second (2 * bytes / time per copy), the GPU memory bandwidth a copy reaches at that size.
double deviceCopyBandwidth(const std::byte* source, std::byte* destination, std::size_t bytes,
                           int warmup, int iters);

}  // namespace ringtrain::bench
