#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "models/cuda/cuda_errors.h"
#include "models/cuda/update_kernels.h"

namespace ringtrain::models::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, 65536));
}

// The loops of training/optimizer.cc, expression for expression (the compilers may still
// contract a product and a sum into one fused multiply-add differently: results agree to an ulp
// or two, not always to the bit).
__global__ void sgdKernel(float* __restrict__ p, const float* __restrict__ g, std::size_t count,
                          float lr, float wd) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] -= lr * (g[i] + wd * p[i]);
}

__global__ void sgdMomentumKernel(float* __restrict__ p, const float* __restrict__ g,
                                  float* __restrict__ v, std::size_t count, float lr, float mu,
                                  bool nesterov, float wd) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (nesterov) {
      const float d = g[i] + wd * p[i];
      v[i] = mu * v[i] + d;
      p[i] -= lr * (d + mu * v[i]);
    } else {
      v[i] = mu * v[i] + g[i] + wd * p[i];
      p[i] -= lr * v[i];
    }
  }
}

__global__ void adamKernel(float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ m, float* __restrict__ v, std::size_t count,
                           float b1, float b2, float eps, float l2, float decay, float stepSize,
                           float rootCorrection2) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float d = g[i] + l2 * p[i];
    m[i] = b1 * m[i] + (1.0f - b1) * d;
    v[i] = b2 * v[i] + (1.0f - b2) * d * d;
    const float denominator = sqrtf(v[i]) / rootCorrection2 + eps;
    p[i] = p[i] * decay - stepSize * m[i] / denominator;
  }
}

__global__ void accumulateKernel(float* __restrict__ sum, const float* __restrict__ g,
                                 std::size_t count, float w, bool start) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    sum[i] = start ? w * g[i] : sum[i] + w * g[i];
}

__global__ void finishAccumulationKernel(float* __restrict__ g, const float* __restrict__ sum,
                                         std::size_t count, float w, float scale) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    g[i] = (w * g[i] + sum[i]) * scale;
}

__global__ void firstNonFiniteKernel(const float* values, std::size_t count,
                                     unsigned long long* first) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (!isfinite(values[i])) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

// firstNonFinite's answer: one device word and one pinned host word per device, allocated on
// first use and kept (16 bytes), so the check allocates nothing per step.
struct NonFiniteScratch {
  unsigned long long* device = nullptr;
  unsigned long long* host = nullptr;
};

std::mutex nonFiniteMutex;  // held for a whole check: the scratch words are shared

NonFiniteScratch& nonFiniteScratch() {
  static std::map<int, NonFiniteScratch> perDevice;
  int device = 0;
  RINGTRAIN_MODELS_CUDA_CHECK(cudaGetDevice(&device));
  NonFiniteScratch& scratch = perDevice[device];
  if (scratch.device == nullptr) {
    RINGTRAIN_MODELS_CUDA_CHECK(cudaMalloc(&scratch.device, sizeof(unsigned long long)));
    RINGTRAIN_MODELS_CUDA_CHECK(
        cudaHostAlloc(&scratch.host, sizeof(unsigned long long), cudaHostAllocDefault));
  }
  return scratch;
}

}  // namespace

void sgdUpdate(float* parameters, const float* gradients, float* velocity, std::size_t count,
               float learningRate, float momentum, bool nesterov, float weightDecay,
               cudaStream_t stream) {
  if (count == 0) return;
  if (momentum == 0.0f) {
    sgdKernel<<<blocksFor(count), kThreads, 0, stream>>>(parameters, gradients, count, learningRate,
                                                         weightDecay);
    RINGTRAIN_MODELS_CUDA_LAUNCHED(sgdKernel);
    return;
  }
  sgdMomentumKernel<<<blocksFor(count), kThreads, 0, stream>>>(
      parameters, gradients, velocity, count, learningRate, momentum, nesterov, weightDecay);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(sgdMomentumKernel);
}

void adamUpdate(float* parameters, const float* gradients, float* m, float* v, std::size_t count,
                float learningRate, float beta1, float beta2, float epsilon, float weightDecay,
                bool decoupled, std::int64_t step, cudaStream_t stream) {
  if (count == 0) return;
  // The bias corrections as the CPU optimiser computes them: in double, then rounded to float.
  const double t = static_cast<double>(step);
  const float correction1 = static_cast<float>(1.0 - std::pow(beta1, t));
  const float correction2 = static_cast<float>(1.0 - std::pow(beta2, t));
  const float stepSize = learningRate / correction1;
  const float rootCorrection2 = std::sqrt(correction2);
  const float l2 = decoupled ? 0.0f : weightDecay;
  const float decay = decoupled ? 1.0f - learningRate * weightDecay : 1.0f;
  adamKernel<<<blocksFor(count), kThreads, 0, stream>>>(parameters, gradients, m, v, count, beta1,
                                                        beta2, epsilon, l2, decay, stepSize,
                                                        rootCorrection2);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(adamKernel);
}

void accumulateGradients(float* sum, const float* gradients, std::size_t count, float weight,
                         bool start, cudaStream_t stream) {
  if (count == 0) return;
  accumulateKernel<<<blocksFor(count), kThreads, 0, stream>>>(sum, gradients, count, weight, start);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(accumulateKernel);
}

void finishAccumulation(float* gradients, const float* sum, std::size_t count, float weight,
                        float scale, cudaStream_t stream) {
  if (count == 0) return;
  finishAccumulationKernel<<<blocksFor(count), kThreads, 0, stream>>>(gradients, sum, count, weight,
                                                                      scale);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(finishAccumulationKernel);
}

std::int64_t firstNonFinite(const float* values, std::size_t count, cudaStream_t stream) {
  if (count == 0) return -1;
  const std::lock_guard<std::mutex> lock(nonFiniteMutex);
  const NonFiniteScratch& scratch = nonFiniteScratch();
  const unsigned long long none = std::numeric_limits<unsigned long long>::max();
  // All bytes 0xff: the largest index, "none found" unless a thread lowers it.
  RINGTRAIN_MODELS_CUDA_CHECK(cudaMemsetAsync(scratch.device, 0xff, sizeof(none), stream));
  firstNonFiniteKernel<<<blocksFor(count), kThreads, 0, stream>>>(values, count, scratch.device);
  RINGTRAIN_MODELS_CUDA_LAUNCHED(firstNonFiniteKernel);
  RINGTRAIN_MODELS_CUDA_CHECK(
      cudaMemcpyAsync(scratch.host, scratch.device, sizeof(none), cudaMemcpyDeviceToHost, stream));
  RINGTRAIN_MODELS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return *scratch.host == none ? -1 : static_cast<std::int64_t>(*scratch.host);
}

}  // namespace ringtrain::models::cuda
