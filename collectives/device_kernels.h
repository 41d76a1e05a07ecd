// The element arithmetic of the device collectives (device_collectives.h), on a stream: the host
// path's own expressions (api/element_math.cc's scale, collectives/reduce_kernels.cc's division)
// with explicitly rounded operations, so that no compiler flag or contraction changes a bit. GPU
// builds only.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "collectives/device_collectives.h"

namespace ringtrain::collectives {

// data[i] *= factor: in the type for float32 and float64, in float32 for the 16-bit floats, in
// float64 for integers (truncated back). Queues nothing for a factor of 1.
void scaleOnDevice(void* data, std::size_t count, DeviceElement type, double factor,
                   cudaStream_t stream);
// data[i] /= divisor, a true division (integers truncate toward zero). 16-bit floats are refused
// (std::invalid_argument): the caller divides their float32 widening, rounding once. Queues nothing
// for a divisor of 1.
void divideOnDevice(void* data, std::size_t count, DeviceElement type, int divisor,
                    cudaStream_t stream);
// 16-bit floats (kFloat16, kBFloat16) to float32, and back rounding to nearest even.
void widenOnDevice(const void* in, float* out, std::size_t count, DeviceElement type,
                   cudaStream_t stream);
void narrowOnDevice(const float* in, void* out, std::size_t count, DeviceElement type,
                    cudaStream_t stream);

}  // namespace ringtrain::collectives
