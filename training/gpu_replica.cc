// The GPU path of gpu_replica.h: GpuModel, GpuOptimizer and the averaged-gradient buffer.
#include "training/gpu_replica.h"

#include <stdexcept>

#include <cuda_runtime_api.h>

#include "collectives/cuda_check.h"
#include "models/cuda/gpu_model.h"
#include "models/cuda/update_kernels.h"
#include "training/device_array.h"
#include "training/gpu_optimizer.h"

namespace ringtrain::training {
namespace {

class CudaReplica final : public GpuReplica {
 public:
  CudaReplica(const models::Model<float>& host, const OptimizerOptions& optimizer,
              const GpuReplicaOptions& options, collectives::Communicator& gradients)
      : device_(gradients.device()) {
    // The communicator chose this rank's GPU; the model's buffers and stream go there too.
    RINGTRAIN_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp properties{};
    RINGTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&properties, device_));
    name_ = properties.name;
    model_ = std::make_unique<models::cuda::GpuModel>(
        host,
        models::cuda::GpuModelOptions{options.tf32, options.convolutions, options.algorithms});
    // Each all-reduce waits on the device for the backward kernels queued before it.
    gradients.setComputeStream(model_->stream());  // a cudaStream_t
    optimizer_ =
        std::make_unique<GpuOptimizer>(optimizer, model_->parameterCount(), model_->stream());
    // One rank averages in place; more reduce out of place, as on the host.
    if (gradients.size() > 1) averaged_ = DeviceArray(model_->parameterCount());
  }

  std::string describe() const override {
    return "GPU " + std::to_string(device_) + " (" + name_ + ")";
  }
  std::string describeModel() const override {
    const std::string convolutions = model_->convolutions();
    return convolutions == "none" ? "" : "convolutions: " + convolutions;
  }
  int deviceIndex() const override { return device_; }
  void reserve(models::Index batch) override { model_->reserve(batch); }
  std::pmr::memory_resource* hostMemory() override {
    return models::cuda::GpuModel::pinnedMemory();
  }
  std::span<float> gradients() override { return {model_->gradients(), count()}; }
  std::span<float> averaged() override {
    return averaged_.empty() ? gradients() : averaged_.span();
  }

  void forward(const models::Batch<float>& batch) override { model_->forward(batch); }
  void backward(const models::GradientReadyCallback& onGradientsReady) override {
    model_->backward(onGradientsReady);
  }
  models::BatchResult lastResult() override { return model_->lastResult(); }
  models::BatchResult evaluate(const models::Batch<float>& batch) override {
    return model_->evaluate(batch);
  }

  void accumulate(std::size_t offset, std::size_t count, const AccumulateRule& rule) override {
    if (sum_.empty()) {
      sum_ = DeviceArray(this->count());
      // Its zeroing (on the default stream) must not land after the kernels below.
      RINGTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    }
    float* g = model_->gradients() + offset;
    float* sum = sum_.data() + offset;
    if (rule.phase == AccumulatePhase::kFinish) {
      models::cuda::finishAccumulation(g, sum, count, rule.weight, rule.scale, model_->stream());
    } else {
      models::cuda::accumulateGradients(sum, g, count, rule.weight,
                                        rule.phase == AccumulatePhase::kStart, model_->stream());
    }
  }

  void update(std::size_t begin, std::size_t end, float learningRate) override {
    optimizer_->update(parameters(), averaged(), begin, end, learningRate);
  }
  void finishStep() override { optimizer_->finishStep(); }

  std::int64_t firstNonFinite(std::size_t offset, std::size_t count) override {
    return models::cuda::firstNonFinite(averaged().data() + offset, count, model_->stream());
  }
  float averagedValue(std::size_t index) override {
    float value = 0;
    RINGTRAIN_CUDA_CHECK(cudaMemcpyAsync(&value, averaged().data() + index, sizeof value,
                                         cudaMemcpyDeviceToHost, model_->stream()));
    RINGTRAIN_CUDA_CHECK(cudaStreamSynchronize(model_->stream()));
    return value;
  }

  void download(models::Model<float>& model, Optimizer& optimizer) override {
    RINGTRAIN_CUDA_CHECK(cudaStreamSynchronize(model_->stream()));  // the last updates
    model_->downloadParameters(model.parameters());
    optimizer_->downloadState(optimizer);
  }
  void upload(const models::Model<float>& model, Optimizer& optimizer) override {
    RINGTRAIN_CUDA_CHECK(cudaStreamSynchronize(model_->stream()));
    model_->uploadParameters(model.parameters());
    optimizer_->uploadState(optimizer);
  }

 private:
  std::size_t count() const { return model_->parameterCount(); }
  std::span<float> parameters() { return {model_->parameters(), count()}; }

  int device_;
  std::string name_;
  std::unique_ptr<models::cuda::GpuModel> model_;
  std::unique_ptr<GpuOptimizer> optimizer_;
  DeviceArray averaged_;  // more than one rank
  DeviceArray sum_;       // --accumulate-steps
};

}  // namespace

bool gpuTrainingBuilt() {
  return true;
}

int visibleGpus(std::string* why) {
  return collectives::visibleCudaDevices(why);
}

std::unique_ptr<GpuReplica> makeGpuReplica(const models::Model<float>& host,
                                           const OptimizerOptions& optimizer,
                                           const GpuReplicaOptions& options,
                                           collectives::Communicator& gradients) {
  if (gradients.device() < 0) {
    throw std::invalid_argument("GPU training averages its gradients with the nccl backend, not " +
                                std::string(gradients.backendName()));
  }
  return std::make_unique<CudaReplica>(host, optimizer, options, gradients);
}

}  // namespace ringtrain::training
