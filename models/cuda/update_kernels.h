// Kernels over ranges of the flat device buffers that the trainer needs beside the model: the
// optimiser updates (training/optimizer.cc's rules, element for element: PyTorch's SGD with
// momentum/Nesterov/weight decay, Adam with L2 decay, AdamW with decoupled decay), gradient
// accumulation (training/gradient_accumulator.cc's rule) and the non-finite check. All enqueue
// on `stream` and return at once unless they say otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace ringtrain::models::cuda {

// momentum == 0: p -= lr * (g + wd * p), and `velocity` may be null.
void sgdUpdate(float* parameters, const float* gradients, float* velocity, std::size_t count,
               float learningRate, float momentum, bool nesterov, float weightDecay,
               cudaStream_t stream);

// `step` counts from 1 (the step being taken: the optimiser's finished steps + 1), for the bias
// corrections, which are computed on the host in double as the CPU optimiser does.
void adamUpdate(float* parameters, const float* gradients, float* m, float* v, std::size_t count,
                float learningRate, float beta1, float beta2, float epsilon, float weightDecay,
                bool decoupled, std::int64_t step, cudaStream_t stream);

// Gradient accumulation: sum = weight * g (start) or sum += weight * g, over [0, count).
void accumulateGradients(float* sum, const float* gradients, std::size_t count, float weight,
                         bool start, cudaStream_t stream);
// The last micro-batch: g = (weight * g + sum) * scale.
void finishAccumulation(float* gradients, const float* sum, std::size_t count, float weight,
                        float scale, cudaStream_t stream);

// Index of the first NaN or infinity in values[0, count), or -1. Synchronises `stream`.
std::int64_t firstNonFinite(const float* values, std::size_t count, cudaStream_t stream);

}  // namespace ringtrain::models::cuda
