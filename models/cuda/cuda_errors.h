// Checked CUDA runtime and cuBLAS calls for models/cuda (GPU builds only).
//
// models/ knows nothing of MPI (see docs/design.md), so unlike collectives/cuda_check.h a
// failure here does not abort the job: it throws std::runtime_error with the call, the library's
// own error name and text, and file:line. The trainer's top level reports it and stops all ranks.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ringtrain::models::cuda {

[[noreturn]] inline void throwCudaFailure(const std::string& call, const std::string& error,
                                          const char* file, int line) {
  throw std::runtime_error(call + " failed: " + error + " (" + file + ":" + std::to_string(line) +
                           ")");
}

inline void checkCuda(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc != cudaSuccess)
    throwCudaFailure(call, std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc), file,
                     line);
}

inline void checkCublas(cublasStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    throwCudaFailure(call, std::string(cublasGetStatusName(rc)) + ": " + cublasGetStatusString(rc),
                     file, line);
}

// After a kernel launch: a bad launch configuration shows up here, not at the next sync.
inline void checkLaunch(const char* kernel, const char* file, int line) {
  checkCuda(cudaGetLastError(), kernel, file, line);
}

}  // namespace ringtrain::models::cuda

#define RINGTRAIN_MODELS_CUDA_CHECK(call) \
  ::ringtrain::models::cuda::checkCuda((call), #call, __FILE__, __LINE__)
#define RINGTRAIN_MODELS_CUBLAS_CHECK(call) \
  ::ringtrain::models::cuda::checkCublas((call), #call, __FILE__, __LINE__)
#define RINGTRAIN_MODELS_CUDA_LAUNCHED(kernel) \
  ::ringtrain::models::cuda::checkLaunch("launch of " #kernel, __FILE__, __LINE__)
