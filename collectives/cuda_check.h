// Checked CUDA runtime and NCCL calls (GPU builds only).
//
// Like RINGTRAIN_MPI_CHECK: a failing call prints "[rank r/N host] cudaXxx failed: <the library's
// error name and text> (file:line)" and what to try, then aborts the whole job (MPI_Abort), so
// mpirun and Kubernetes see a failure instead of the other ranks hanging in their next collective.
#pragma once

#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace ringtrain::collectives {

void checkCuda(cudaError_t rc, const char* call, const char* file, int line);
// ncclInProgress counts as success: it only says a non-blocking communicator is still busy.
void checkNccl(ncclResult_t rc, const char* call, const char* file, int line);

// How many CUDA devices this process sees; 0 with the reason in `why` when there are none (no
// driver, no device, CUDA_VISIBLE_DEVICES empty). Never aborts: tests use it to skip.
int visibleCudaDevices(std::string* why = nullptr);

// "NCCL 2.28.9" from ncclGetVersion (the library loaded, not the header compiled against).
std::string ncclVersionText();

}  // namespace ringtrain::collectives

#define RINGTRAIN_CUDA_CHECK(call) \
  ::ringtrain::collectives::checkCuda((call), #call, __FILE__, __LINE__)
#define RINGTRAIN_NCCL_CHECK(call) \
  ::ringtrain::collectives::checkNccl((call), #call, __FILE__, __LINE__)
