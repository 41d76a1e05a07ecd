// GpuModel: a Model<float> mirrored on one CUDA device (GPU builds only: RINGTRAIN_HAVE_CUDA).
//
// The host model is the description and the host copy: the GPU model has the same layers (by
// kind and shape: linear, relu, conv2d, max_pool2d, flatten), the same loss and the same flat
// parameter layout (parameterTable() offsets), so rank 0's broadcast, checkpoints and the
// consistency check keep working on the host model, and a fusion bucket is the same range of the
// device gradient buffer as of the host one. Matrix products go through cuBLAS (TF32 tensor-core
// math when `tf32` is true, full float32 otherwise); convolutions on channels-last inputs
// through cuDNN where the build has it (cudnn_convolutions.h), else im2col and cuBLAS;
// activations, loss, pooling, im2col/col2im and the bias sums are our own kernels. Everything
// runs on the model's compute stream; nothing synchronises the host except the calls that say so.
//
// Inputs arrive in host memory (what data/ delivers): forward() copies the batch into pinned
// staging memory, then to the device on a separate copy stream, and the compute stream waits for
// that copy through an event; two staging slots alternate, so the copy of one batch can run
// while the previous step's kernels still run. A batch that already lies in page-locked memory
// (pinnedMemory()) goes to the device from there, without the staging copy on the host.
#pragma once

#include <cstddef>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>

#include <cuda_runtime_api.h>

#include "models/conv2d.h"
#include "models/model.h"

namespace ringtrain::models::cuda {

struct GpuModelOptions {
  bool tf32 = false;  // TF32 tensor-core math for the float32 products and convolutions
  ConvolutionPath convolutions = ConvolutionPath::kFastest;  // models/conv2d.h
  ConvolutionAlgorithms algorithms = ConvolutionAlgorithms::kPlain;  // cuDNN's (models/conv2d.h)
};

class GpuModel {
 public:
  // Builds the device mirror of `host` on the current CUDA device (cudaSetDevice first) and
  // copies its parameters. Throws std::invalid_argument for a layer kind it cannot run.
  explicit GpuModel(const Model<float>& host, const GpuModelOptions& options = {});
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  cudaStream_t stream() const;  // the compute stream
  std::size_t parameterCount() const;
  float* parameters();  // device, flat, the host model's layout
  float* gradients();   // device, flat, same layout
  const float* parameters() const;
  const float* gradients() const;

  // Host <-> device copies of the flat parameters (synchronous).
  void uploadParameters(std::span<const float> host);
  void downloadParameters(std::span<float> host) const;

  // Allocates everything a step of up to `batch` samples needs (device arenas, staging) and
  // times the convolutions' paths there (kFastest). Synchronises.
  void reserve(Index batch);

  // Page-locked host memory (cudaHostAlloc) for batches: forward() sends such a batch to the
  // device directly, so it must stay unchanged until lastResult() returns.
  static std::pmr::memory_resource* pinnedMemory();

  // Training forward: copies the batch to the device and enqueues forward and the loss with its
  // gradient. Returns at once; lastResult() gives the loss sum and correct count. Throws
  // std::invalid_argument for a batch whose sizes do not match the model.
  void forward(const Batch<float>& batch);
  // Enqueues backward for the last forward(), from the last layer to the first; calls
  // onGradientsReady for each layer with parameters as soon as that layer's parameter gradients
  // are enqueued (a collective on another stream must first wait for the compute stream: the
  // nccl backend's setComputeStream does that). Throws std::logic_error without a forward.
  void backward(const GradientReadyCallback& onGradientsReady = {});
  // Waits for the last forward's loss and returns the batch's sums (synchronises).
  BatchResult lastResult();
  // Loss and correct count without backward, in chunks of at most reservedBatch() samples
  // (synchronises).
  BatchResult evaluate(const Batch<float>& batch);
  Index reservedBatch() const;
  // How each convolution runs, for logs: "cuDNN 9.19.0 where faster: conv1: im2col +
  // cuBLAS, 0.120 ms a pass against 0.300 ms by cuDNN; conv2: cuDNN forward ...", or "none".
  std::string convolutions() const;
  // Device memory holding the model's outputs (outputSize() × B, column-major) of the last
  // forward, or of the last chunk evaluated; valid once the compute stream has reached it.
  const float* outputs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::models::cuda
