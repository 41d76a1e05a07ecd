// GpuReplica: this rank's model, optimiser and averaged gradients on its GPU (--device cuda).
//
// The trainer keeps its host model and host optimiser as the mirror of the GPU state: rank 0's
// initial weights are broadcast there, checkpoints are written and read there, the consistency
// check and the final fingerprint read them. download() brings the GPU state into the mirror
// (before a checkpoint, at the end), upload() takes it back (after a resume). In between, a
// step runs entirely on the GPU: the batch goes up, forward and backward run on the model's
// compute stream, the `nccl` gradient communicator averages the device gradient buffer bucket by
// bucket (its collectives wait on the compute stream through an event), and the optimiser
// updates each bucket with a kernel.
//
// This header has no CUDA types, so that the trainer is the same code in every build; a build
// without the GPU path (no models/cuda library) links gpu_replica_none.cc, whose
// makeGpuReplica throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>

#include "collectives/communicator.h"
#include "models/conv2d.h"
#include "models/model.h"
#include "training/gradient_accumulator.h"
#include "training/optimizer.h"

namespace ringtrain::training {

class GpuReplica {
 public:
  virtual ~GpuReplica() = default;

  // "GPU 0 (NVIDIA H100 80GB HBM3)".
  virtual std::string describe() const = 0;
  // "convolutions: cuDNN 9.19.0 where faster: conv1: ...", once reserve() chose; "" for a
  // model without convolutions.
  virtual std::string describeModel() const = 0;
  virtual int deviceIndex() const = 0;

  virtual void reserve(models::Index batch) = 0;
  // Host memory for training batches that forward() sends to the GPU without a staging copy
  // (page-locked); a batch in it must stay unchanged until lastResult() returns.
  virtual std::pmr::memory_resource* hostMemory() = 0;
  // Device spans of the flat buffers (the host model's layout): the gradients backward writes,
  // and where the reducer puts their average (the gradients themselves with one rank).
  virtual std::span<float> gradients() = 0;
  virtual std::span<float> averaged() = 0;

  // Enqueue one training step's forward and backward (GpuModel); lastResult() waits for the
  // loss. backward calls onGradientsReady as each layer's gradients are enqueued.
  virtual void forward(const models::Batch<float>& batch) = 0;
  virtual void backward(const models::GradientReadyCallback& onGradientsReady) = 0;
  virtual models::BatchResult lastResult() = 0;
  virtual models::BatchResult evaluate(const models::Batch<float>& batch) = 0;

  // --accumulate-steps: applies `rule` to gradients()[offset, offset + count) and this replica's
  // device sum of the step's earlier micro-batches, on the compute stream (so before any
  // all-reduce the layer's announcement starts).
  virtual void accumulate(std::size_t offset, std::size_t count, const AccumulateRule& rule) = 0;

  // The optimiser on averaged()[begin, end), and the end of its step.
  virtual void update(std::size_t begin, std::size_t end, float learningRate) = 0;
  virtual void finishStep() = 0;

  // --check-finite: index of the first NaN or infinity in averaged()[offset, offset + count)
  // relative to offset, or -1; and one averaged value, copied to the host (both synchronise).
  virtual std::int64_t firstNonFinite(std::size_t offset, std::size_t count) = 0;
  virtual float averagedValue(std::size_t index) = 0;

  // GPU state -> host mirror (parameters, optimiser state and step count), and back.
  virtual void download(models::Model<float>& model, Optimizer& optimizer) = 0;
  virtual void upload(const models::Model<float>& model, Optimizer& optimizer) = 0;
};

// Whether this build can train on GPUs.
bool gpuTrainingBuilt();
// GPUs this process sees; 0 with the reason in `why` (also in a build without the GPU path).
int visibleGpus(std::string* why);

// The GPU mirror of `host` (its current parameters) on the GPU of `gradients`, which must be the
// nccl backend's communicator; it is told to order its collectives after the model's stream.
// Throws std::logic_error in a build without the GPU path.
struct GpuReplicaOptions {
  bool tf32 = false;  // TF32 tensor-core math for the products and convolutions
  models::ConvolutionPath convolutions = models::ConvolutionPath::kFastest;
  models::ConvolutionAlgorithms algorithms = models::ConvolutionAlgorithms::kPlain;
};

std::unique_ptr<GpuReplica> makeGpuReplica(const models::Model<float>& host,
                                           const OptimizerOptions& optimizer,
                                           const GpuReplicaOptions& options,
                                           collectives::Communicator& gradients);

}  // namespace ringtrain::training
