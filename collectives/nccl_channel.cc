#include "collectives/nccl_channel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "collectives/cuda_check.h"
#include "collectives/mpi_check.h"

namespace ringtrain::collectives {
namespace {

constexpr int kBusIdLength = 32;

}  // namespace

ncclDataType_t ncclType(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t ncclOp(DataType type, ReduceOp op, std::string_view backend) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAverage:
      if (!isFloatingPoint(type)) {
        throw std::invalid_argument(std::string(backend) + " backend: no average of " +
                                    std::string(name(type)) +
                                    " (NCCL averages floating-point types only)");
      }
      return ncclAvg;
  }
  return ncclSum;
}

int chooseNodeDevice(MPI_Comm node, std::string_view backend) {
  const std::string who(backend);
  int localRank = 0, localSize = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(node, &localRank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(node, &localSize));

  std::string why;
  const int devices = visibleCudaDevices(&why);
  // Every rank of the node learns whether any of them sees no GPU, so all fail together.
  int fewest = devices;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&devices, &fewest, 1, MPI_INT, MPI_MIN, node));
  if (devices == 0) abortJob(who + " backend: no CUDA device visible (" + why + ")");
  if (fewest == 0) abortJob(who + " backend: another rank on this node sees no CUDA device");
  const int device = localRank % devices;

  char busId[kBusIdLength] = {};
  RINGTRAIN_CUDA_CHECK(cudaDeviceGetPCIBusId(busId, kBusIdLength, device));
  std::vector<char> all(static_cast<std::size_t>(localSize) * kBusIdLength);
  RINGTRAIN_MPI_CHECK(
      MPI_Allgather(busId, kBusIdLength, MPI_CHAR, all.data(), kBusIdLength, MPI_CHAR, node));
  for (int other = 0; other < localSize; ++other) {
    if (other == localRank ||
        std::strncmp(busId, all.data() + other * kBusIdLength, kBusIdLength) != 0) {
      continue;
    }
    abortJob(who + " backend: local ranks " + std::to_string(std::min(localRank, other)) + " and " +
             std::to_string(std::max(localRank, other)) + " would share GPU " + busId + " (" +
             std::to_string(localSize) + " ranks on this node, " + std::to_string(devices) +
             " GPU(s) visible to this rank); NCCL does not allow two ranks on one GPU: start "
             "at most one rank per GPU (Open MPI's mpirun -npernode N, MPICH's mpiexec -ppn N) "
             "or check CUDA_VISIBLE_DEVICES");
  }
  return device;
}

int deviceHolding(const void* buffer) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, buffer) != cudaSuccess) {
    (void)cudaGetLastError();  // not an error to keep: the answer is "not device memory"
    return kNotDevice;
  }
  if (attributes.type == cudaMemoryTypeManaged) return kManaged;
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : kNotDevice;
}

std::string deviceBufferProblem(const void* buffer, std::size_t count, std::string_view backend,
                                const char* what) {
  if (count == 0 || deviceHolding(buffer) != kNotDevice) return "";
  return std::string(backend) + " backend: " + what +
         " buffer is not device memory; allocate it with cudaMalloc (the mpi, ring and "
         "hierarchical backends take host buffers)";
}

NcclChannel::NcclChannel(MPI_Comm comm, int device, std::string_view backend)
    : backend_(backend), device_(device) {
  int rank = 0, size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  RINGTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  RINGTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RINGTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  RINGTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) RINGTRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  RINGTRAIN_NCCL_CHECK(ncclCommInitRank(&nccl_, size, id, rank));
}

NcclChannel::~NcclChannel() {
  // No aborting in a destructor: errors here are reported by the next call that fails.
  if (nccl_ != nullptr) ncclCommDestroy(nccl_);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclChannel::useDevice() {
  RINGTRAIN_CUDA_CHECK(cudaSetDevice(device_));
}

void NcclChannel::orderAfter(cudaStream_t compute) {
  useDevice();
  RINGTRAIN_CUDA_CHECK(cudaEventRecord(ready_, compute));
  RINGTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
}

void NcclChannel::wait(const std::string& what, WaitMode mode) {
  RINGTRAIN_CUDA_CHECK(cudaEventRecord(done_, stream_));
  for (;;) {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) RINGTRAIN_CUDA_CHECK(status);
    ncclResult_t asyncError = ncclSuccess;
    RINGTRAIN_NCCL_CHECK(ncclCommGetAsyncError(nccl_, &asyncError));
    if (asyncError != ncclSuccess && asyncError != ncclInProgress) {
      const std::string detail = ncclGetLastError(nccl_);
      // Abort the communicator first: it releases the kernels still waiting for peers.
      ncclCommAbort(nccl_);
      nccl_ = nullptr;
      abortJob(backend_ + " backend: " + what + " failed asynchronously: " +
               ncclGetErrorString(asyncError) + (detail.empty() ? "" : " (" + detail + ")") +
               "; NCCL communicator aborted. Rerun with NCCL_DEBUG=INFO; across hosts check "
               "NCCL_SOCKET_IFNAME");
    }
    if (mode == WaitMode::kYield) std::this_thread::yield();
  }
}

}  // namespace ringtrain::collectives
