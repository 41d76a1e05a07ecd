#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "collectives/cuda_check.h"
#include "collectives/device_kernels.h"

namespace ringtrain::collectives {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, 65536));
}

// The host path's scaling, operation for operation (api/element_math.cc scaleTyped).
__device__ float scaled(float x, double f) {
  return __fmul_rn(x, static_cast<float>(f));
}
__device__ double scaled(double x, double f) {
  return __dmul_rn(x, f);
}
__device__ __half scaled(__half x, double f) {
  return __float2half_rn(__fmul_rn(__half2float(x), static_cast<float>(f)));
}
__device__ __nv_bfloat16 scaled(__nv_bfloat16 x, double f) {
  return __float2bfloat16_rn(__fmul_rn(__bfloat162float(x), static_cast<float>(f)));
}
template <class T>
__device__ T scaled(T x, double f) {  // integers: in float64, truncated back
  return static_cast<T>(__dmul_rn(static_cast<double>(x), f));
}

__device__ float divided(float x, int d) {
  return __fdiv_rn(x, static_cast<float>(d));
}
__device__ double divided(double x, int d) {
  return __ddiv_rn(x, static_cast<double>(d));
}
template <class T>
__device__ T divided(T x, int d) {  // integers
  return static_cast<T>(x / static_cast<T>(d));
}

template <class T>
__global__ void scaleKernel(T* data, std::size_t count, double factor) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = scaled(data[i], factor);
}

template <class T>
__global__ void divideKernel(T* data, std::size_t count, int divisor) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = divided(data[i], divisor);
}

__device__ float toFloat(__half x) {
  return __half2float(x);
}
__device__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class Half>
__device__ Half fromFloat(float x);
template <>
__device__ __half fromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <class Half>
__global__ void widenKernel(const Half* in, float* out, std::size_t count) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = toFloat(in[i]);
}

template <class Half>
__global__ void narrowKernel(const float* in, Half* out, std::size_t count) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = fromFloat<Half>(in[i]);
}

// Calls body(T{}) with T the CUDA type of `type`.
template <class Body>
void dispatch(DeviceElement type, Body&& body) {
  switch (type) {
    case DeviceElement::kFloat32:
      return body(float{});
    case DeviceElement::kFloat64:
      return body(double{});
    case DeviceElement::kFloat16:
      return body(__half{});
    case DeviceElement::kBFloat16:
      return body(__nv_bfloat16{});
    case DeviceElement::kInt32:
      return body(std::int32_t{});
    case DeviceElement::kInt64:
      return body(std::int64_t{});
    case DeviceElement::kUInt8:
      return body(std::uint8_t{});
    case DeviceElement::kInt8:
      return body(std::int8_t{});
  }
}

bool isHalf(DeviceElement type) {
  return type == DeviceElement::kFloat16 || type == DeviceElement::kBFloat16;
}

}  // namespace

void scaleOnDevice(void* data, std::size_t count, DeviceElement type, double factor,
                   cudaStream_t stream) {
  if (factor == 1.0 || count == 0) return;
  dispatch(type, [&](auto value) {
    using T = decltype(value);
    scaleKernel<<<blocksFor(count), kThreads, 0, stream>>>(static_cast<T*>(data), count, factor);
  });
  RINGTRAIN_CUDA_CHECK(cudaGetLastError());
}

void divideOnDevice(void* data, std::size_t count, DeviceElement type, int divisor,
                    cudaStream_t stream) {
  if (isHalf(type)) throw std::invalid_argument("divideOnDevice: widen 16-bit floats first");
  if (divisor <= 1 || count == 0) return;
  dispatch(type, [&](auto value) {
    using T = decltype(value);
    if constexpr (!std::is_same_v<T, __half> && !std::is_same_v<T, __nv_bfloat16>) {
      divideKernel<<<blocksFor(count), kThreads, 0, stream>>>(static_cast<T*>(data), count,
                                                              divisor);
    }
  });
  RINGTRAIN_CUDA_CHECK(cudaGetLastError());
}

void widenOnDevice(const void* in, float* out, std::size_t count, DeviceElement type,
                   cudaStream_t stream) {
  if (!isHalf(type)) throw std::invalid_argument("widenOnDevice: not a 16-bit float");
  if (count == 0) return;
  if (type == DeviceElement::kFloat16) {
    widenKernel<<<blocksFor(count), kThreads, 0, stream>>>(static_cast<const __half*>(in), out,
                                                           count);
  } else {
    widenKernel<<<blocksFor(count), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(in),
                                                           out, count);
  }
  RINGTRAIN_CUDA_CHECK(cudaGetLastError());
}

void narrowOnDevice(const float* in, void* out, std::size_t count, DeviceElement type,
                    cudaStream_t stream) {
  if (!isHalf(type)) throw std::invalid_argument("narrowOnDevice: not a 16-bit float");
  if (count == 0) return;
  if (type == DeviceElement::kFloat16) {
    narrowKernel<<<blocksFor(count), kThreads, 0, stream>>>(in, static_cast<__half*>(out), count);
  } else {
    narrowKernel<<<blocksFor(count), kThreads, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out),
                                                            count);
  }
  RINGTRAIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ringtrain::collectives
