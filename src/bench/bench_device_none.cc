// The CPU-only build: no GPU path, so --device cuda is refused before anything is allocated.
#include <stdexcept>

#include "src/bench/bench_device.h"

namespace ringtrain::bench {
namespace {

[[noreturn]] void noGpuPath() {
  throw std::runtime_error(
      "--device cuda needs a build with CUDA and NCCL; this one was configured without them "
      "(RINGTRAIN_CUDA=OFF, or CMake found no CUDA toolkit/NCCL)");
}

}  // namespace

int selectDevice(int, std::string*) {
  noGpuPath();
}

DeviceBytes::DeviceBytes(std::size_t) {
  noGpuPath();
}

DeviceBytes::~DeviceBytes() = default;

void copyToDevice(void*, const void*, std::size_t) {
  noGpuPath();
}

void copyToHost(void*, const void*, std::size_t) {
  noGpuPath();
}

double deviceCopyBandwidth(const std::byte*, std::byte*, std::size_t, int, int) {
  noGpuPath();
}

}  // namespace ringtrain::bench
