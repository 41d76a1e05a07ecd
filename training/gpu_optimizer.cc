#include "training/gpu_optimizer.h"

#include <stdexcept>
#include <string>

#include "models/cuda/update_kernels.h"

namespace ringtrain::training {

GpuOptimizer::GpuOptimizer(const OptimizerOptions& options, std::size_t parameters,
                           cudaStream_t stream)
    : options_(options), stream_(stream) {
  if (options.kind == OptimizerKind::kSgd) {
    if (options.momentum > 0) first_ = DeviceArray(parameters);
  } else {
    first_ = DeviceArray(parameters);
    second_ = DeviceArray(parameters);
  }
}

void GpuOptimizer::update(std::span<float> parameters, std::span<const float> gradients,
                          std::size_t begin, std::size_t end, float learningRate) {
  if (end <= begin) return;
  const OptimizerOptions& o = options_;
  if (o.kind == OptimizerKind::kSgd) {
    models::cuda::sgdUpdate(parameters.data() + begin, gradients.data() + begin,
                            first_.empty() ? nullptr : first_.data() + begin, end - begin,
                            learningRate, o.momentum, o.nesterov, o.weightDecay, stream_);
  } else {
    models::cuda::adamUpdate(parameters.data() + begin, gradients.data() + begin,
                             first_.data() + begin, second_.data() + begin, end - begin,
                             learningRate, o.beta1, o.beta2, o.epsilon, o.weightDecay,
                             o.kind == OptimizerKind::kAdamW, steps_ + 1, stream_);
  }
}

std::vector<std::span<float>> GpuOptimizer::state() {
  if (options_.kind == OptimizerKind::kSgd) return {first_.span()};
  return {first_.span(), second_.span()};
}

void GpuOptimizer::copyState(Optimizer& host, cudaMemcpyKind kind) {
  const std::vector<std::span<float>> device = state();
  const std::vector<std::span<float>> mirror = host.state();
  bool sameShape = device.size() == mirror.size();
  for (std::size_t i = 0; sameShape && i < device.size(); ++i)
    sameShape = device[i].size() == mirror[i].size();
  if (!sameShape) throw std::logic_error("GpuOptimizer: the host optimiser's state differs");
  const bool down = kind == cudaMemcpyDeviceToHost;
  for (std::size_t i = 0; i < device.size(); ++i) {
    if (device[i].empty()) continue;
    RINGTRAIN_CUDA_CHECK(cudaMemcpyAsync(down ? mirror[i].data() : device[i].data(),
                                         down ? device[i].data() : mirror[i].data(),
                                         device[i].size_bytes(), kind, stream_));
  }
  // After the updates queued on the stream; pageable host memory needs the wait anyway.
  RINGTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuOptimizer::downloadState(Optimizer& host) {
  copyState(host, cudaMemcpyDeviceToHost);
  host.restoreSteps(steps());
}

void GpuOptimizer::uploadState(Optimizer& host) {
  copyState(host, cudaMemcpyHostToDevice);
  restoreSteps(host.steps());
}

}  // namespace ringtrain::training
