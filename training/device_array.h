// DeviceArray: float32 elements in CUDA device memory, freed with the object (GPU builds only).
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include <cuda_runtime_api.h>

#include "collectives/cuda_check.h"

namespace ringtrain::training {

class DeviceArray {
 public:
  DeviceArray() = default;
  // `count` elements on the current device, zeroed.
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (count_ == 0) return;
    RINGTRAIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(float)));
    RINGTRAIN_CUDA_CHECK(cudaMemset(data_, 0, count_ * sizeof(float)));
  }
  ~DeviceArray() {
    if (data_ != nullptr) (void)cudaFree(data_);
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }

  float* data() { return data_; }
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  std::span<float> span() { return {data_, count_}; }

 private:
  float* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace ringtrain::training
