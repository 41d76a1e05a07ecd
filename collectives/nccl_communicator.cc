#include "collectives/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "collectives/cuda_check.h"
#include "collectives/mpi_check.h"

namespace ringtrain::collectives {
namespace {

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

ncclRedOp_t ncclOp(DataType type, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAverage:
      if (!isFloatingPoint(type)) {
        throw std::invalid_argument("nccl backend: no average of " + std::string(name(type)) +
                                    " (NCCL averages floating-point types only)");
      }
      return ncclAvg;
  }
  return ncclSum;
}

constexpr int kBusIdLength = 32;

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, const CommunicatorOptions& options)
    : Communicator(comm, options), agreement_(this->comm(), 0, waitMode()) {
  chooseDevice();
  RINGTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  RINGTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RINGTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&computeReady_, cudaEventDisableTiming));
  RINGTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank() == 0) RINGTRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, this->comm()));
  RINGTRAIN_NCCL_CHECK(ncclCommInitRank(&nccl_, size(), id, rank()));
  if (rank() == 0) {
    printLine(ncclVersionText() + ": " + std::to_string(size()) +
                  " rank(s), one GPU each (NCCL_DEBUG=INFO shows NCCL's choices)",
              OutputStream::kStandardOutput);
  }
}

NcclCommunicator::~NcclCommunicator() {
  // No aborting in a destructor: errors here are reported by the next call that fails.
  if (nccl_ != nullptr) ncclCommDestroy(nccl_);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (computeReady_ != nullptr) cudaEventDestroy(computeReady_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// local_rank % device_count, then a check across the node that no two ranks hold the same GPU:
// compared by PCI bus id, so it also catches ranks whose CUDA_VISIBLE_DEVICES differ.
void NcclCommunicator::chooseDevice() {
  MPI_Comm node = MPI_COMM_NULL;
  RINGTRAIN_MPI_CHECK(
      MPI_Comm_split_type(comm(), MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &node));
  int localRank = 0, localSize = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(node, &localRank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(node, &localSize));

  std::string why;
  const int devices = visibleCudaDevices(&why);
  // Every rank of the node learns whether any of them sees no GPU, so all fail together.
  int fewest = devices;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&devices, &fewest, 1, MPI_INT, MPI_MIN, node));
  if (devices == 0) abortJob("nccl backend: no CUDA device visible (" + why + ")");
  if (fewest == 0) abortJob("nccl backend: another rank on this node sees no CUDA device");
  device_ = localRank % devices;

  char busId[kBusIdLength] = {};
  RINGTRAIN_CUDA_CHECK(cudaDeviceGetPCIBusId(busId, kBusIdLength, device_));
  std::vector<char> all(static_cast<std::size_t>(localSize) * kBusIdLength);
  RINGTRAIN_MPI_CHECK(
      MPI_Allgather(busId, kBusIdLength, MPI_CHAR, all.data(), kBusIdLength, MPI_CHAR, node));
  RINGTRAIN_MPI_CHECK(MPI_Comm_free(&node));
  for (int other = 0; other < localSize; ++other) {
    if (other == localRank ||
        std::strncmp(busId, all.data() + other * kBusIdLength, kBusIdLength) != 0) {
      continue;
    }
    abortJob("nccl backend: local ranks " + std::to_string(std::min(localRank, other)) + " and " +
             std::to_string(std::max(localRank, other)) + " would share GPU " + busId + " (" +
             std::to_string(localSize) + " ranks on this node, " + std::to_string(devices) +
             " GPU(s) visible to this rank); NCCL does not allow two ranks on one GPU: start "
             "at most one rank per GPU (mpirun -npernode N) or check CUDA_VISIBLE_DEVICES");
  }
}

std::string NcclCommunicator::hostBufferProblem(const void* buffer, std::size_t count,
                                                const char* what) const {
  if (count == 0) return "";
  cudaPointerAttributes attributes{};
  const cudaError_t rc = cudaPointerGetAttributes(&attributes, buffer);
  if (rc != cudaSuccess) (void)cudaGetLastError();
  if (rc == cudaSuccess &&
      (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged)) {
    return "";
  }
  return std::string("nccl backend: ") + what +
         " buffer is not device memory; allocate it with cudaMalloc (the mpi, ring and "
         "hierarchical backends take host buffers)";
}

// A rank whose buffer is host memory still takes part in the agreement, with a signature no
// valid call has (data type -1), so that the other ranks throw CollectiveMismatchError instead of
// waiting in NCCL for it; it throws std::invalid_argument naming the buffer.
void NcclCommunicator::agreeOnCall(CallSignature signature, const std::string& problem) {
  if (!problem.empty()) signature.dataType = -1;
  try {
    agreement_.agree(signature);
  } catch (const CollectiveMismatchError&) {
    if (problem.empty()) throw;
  }
  if (!problem.empty()) throw std::invalid_argument(problem);
}

void NcclCommunicator::orderAfterCompute() {
  RINGTRAIN_CUDA_CHECK(cudaSetDevice(device_));
  RINGTRAIN_CUDA_CHECK(cudaEventRecord(computeReady_, computeStream_));
  RINGTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream_, computeReady_, 0));
}

void NcclCommunicator::waitForCompletion(const char* what) {
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
      abortJob(std::string("nccl backend: ") + what + " #" + std::to_string(collectiveCount()) +
               " failed asynchronously: " + ncclGetErrorString(asyncError) +
               (detail.empty() ? "" : " (" + detail + ")") +
               "; NCCL communicator aborted. Rerun with NCCL_DEBUG=INFO; across hosts check "
               "NCCL_SOCKET_IFNAME");
    }
    if (waitMode() == WaitMode::kYield) {
      std::this_thread::yield();
    }
  }
}

void NcclCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                                     ReduceOp op) {
  std::string problem = hostBufferProblem(send, count, "all-reduce send");
  if (problem.empty()) problem = hostBufferProblem(recv, count, "all-reduce recv");
  agreeOnCall(makeSignature(collectiveCount(), CollectiveKind::kAllreduce, count, type,
                            static_cast<int>(op)),
              problem);
  const ncclRedOp_t reduction = ncclOp(type, op);
  orderAfterCompute();
  RINGTRAIN_NCCL_CHECK(ncclAllReduce(send, recv, count, ncclType(type), reduction, nccl_, stream_));
  waitForCompletion("all-reduce");
}

void NcclCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type, int root) {
  agreeOnCall(makeSignature(collectiveCount(), CollectiveKind::kBroadcast, count, type, -1, root),
              hostBufferProblem(buffer, count, "broadcast"));
  orderAfterCompute();
  RINGTRAIN_NCCL_CHECK(ncclBroadcast(buffer, buffer, count, ncclType(type), root, nccl_, stream_));
  waitForCompletion("broadcast");
}

void NcclCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                     DataType type) {
  std::string problem = hostBufferProblem(send, countPerRank, "all-gather send");
  if (problem.empty()) {
    problem =
        hostBufferProblem(recv, countPerRank * static_cast<std::size_t>(size()), "all-gather recv");
  }
  agreeOnCall(makeSignature(collectiveCount(), CollectiveKind::kAllgather, countPerRank, type),
              problem);
  orderAfterCompute();
  // In place (send == recv + rank * countPerRank) is NCCL's own in-place all-gather.
  RINGTRAIN_NCCL_CHECK(ncclAllGather(send, recv, countPerRank, ncclType(type), nccl_, stream_));
  waitForCompletion("all-gather");
}

void NcclCommunicator::barrierImpl() {
  // Everything this communicator queued has finished when its calls return; MPI orders the hosts.
  RINGTRAIN_MPI_CHECK(MPI_Barrier(comm()));
}

}  // namespace ringtrain::collectives
