#include "collectives/cuda_check.h"

#include <string_view>

#include "collectives/mpi_check.h"

namespace ringtrain::collectives {
namespace {

// "cudaMalloc(&p, n)" -> "cudaMalloc": the call's name without its arguments.
std::string_view functionName(const char* call) {
  const std::string_view text(call);
  return text.substr(0, text.find('('));
}

std::string where(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

}  // namespace

void checkCuda(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc == cudaSuccess) return;
  abortJob(std::string(functionName(call)) + " failed: " + cudaGetErrorName(rc) + ": " +
           cudaGetErrorString(rc) + " (" + where(file, line) +
           "); check the GPU with nvidia-smi and the driver/toolkit versions");
}

void checkNccl(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  // ncclGetLastError(nullptr) holds the most recent detail NCCL logged in this process.
  const char* detail = ncclGetLastError(nullptr);
  abortJob(std::string(functionName(call)) + " failed: " + ncclGetErrorString(rc) +
           (detail != nullptr && *detail != '\0' ? std::string(" (") + detail + ")" : "") + " (" +
           where(file, line) + "); rerun with NCCL_DEBUG=INFO for NCCL's own account");
}

int visibleCudaDevices(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error so later calls are not blamed for it
    if (why != nullptr) *why = std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc);
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "cudaGetDeviceCount reports 0 devices";
  return count;
}

std::string ncclVersionText() {
  int version = 0;
  RINGTRAIN_NCCL_CHECK(ncclGetVersion(&version));
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         "." + std::to_string(version % 100);
}

}  // namespace ringtrain::collectives
