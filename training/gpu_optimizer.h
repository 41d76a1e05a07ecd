// GpuOptimizer: the optimisers of optimizer.h on device buffers (GPU builds only).
//
// The same rules, element for element (models/cuda/update_kernels.h), with the state (velocity;
// Adam's moments) in device memory. update() takes device spans and enqueues a kernel on the
// stream it was built with; nothing synchronises the host. downloadState/uploadState copy the
// state and the step count to and from a host optimiser of the same kind, whose state() is what
// checkpoints hold.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <cuda_runtime_api.h>

#include "training/device_array.h"
#include "training/optimizer.h"

namespace ringtrain::training {

class GpuOptimizer final : public Optimizer {
 public:
  // Throws std::invalid_argument for an unknown kind.
  GpuOptimizer(const OptimizerOptions& options, std::size_t parameters, cudaStream_t stream);

  // parameters and gradients are device spans of the whole flat buffers.
  void update(std::span<float> parameters, std::span<const float> gradients, std::size_t begin,
              std::size_t end, float learningRate) override;
  // Device spans, in the order of the host optimiser's state().
  std::vector<std::span<float>> state() override;

  // Synchronous copies of the state and the step count: into `host`, or from it.
  void downloadState(Optimizer& host);
  void uploadState(Optimizer& host);

 private:
  void copyState(Optimizer& host, cudaMemcpyKind kind);

  OptimizerOptions options_;
  cudaStream_t stream_;
  DeviceArray first_;   // sgd: velocity (empty without momentum); adam: first moment
  DeviceArray second_;  // adam: second moment
};

}  // namespace ringtrain::training
