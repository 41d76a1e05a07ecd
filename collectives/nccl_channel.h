// What both GPU backends (`nccl` and `hierarchical-nccl`) need from CUDA and NCCL, written once:
// the GPU a rank takes, the refusal of two ranks on one GPU, the check that a buffer is device
// memory, the mapping of types and reductions, and NcclChannel, an NCCL communicator started from
// MPI with its own stream and a wait that polls for asynchronous NCCL errors (GPU builds only).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "collectives/data_type.h"
#include "collectives/request_wait.h"

namespace ringtrain::collectives {

ncclDataType_t ncclType(DataType type);
// Throws std::invalid_argument, naming `backend`, for averages of integer types (NCCL's ncclAvg
// takes floating-point types only).
ncclRedOp_t ncclOp(DataType type, ReduceOp op, std::string_view backend);

// The GPU this rank uses: its rank in `node` modulo the devices it sees. Collective over `node`.
// Aborts the job, naming `backend`, when a rank of `node` sees no GPU, or when two ranks of `node`
// would take the same GPU (compared by PCI bus id, so differing CUDA_VISIBLE_DEVICES are caught
// too): NCCL does not allow two ranks of one communicator on one GPU. `node` is the real node
// (MPI_COMM_TYPE_SHARED) or, for the hierarchical backend's tests, a simulated one.
int chooseNodeDevice(MPI_Comm node, std::string_view backend);

// What holds `buffer`: kNotDevice (host memory, or no CUDA pointer), kManaged (managed memory,
// which every device reads), else the index of the CUDA device whose memory it is.
inline constexpr int kNotDevice = -2, kManaged = -1;
int deviceHolding(const void* buffer);

// "" when `buffer` holds device (or managed) memory or count is 0; otherwise what is wrong with
// it, naming `backend` and `what` ("all-reduce send").
std::string deviceBufferProblem(const void* buffer, std::size_t count, std::string_view backend,
                                const char* what);

// One NCCL communicator over the ranks of `comm`, on `device`, with its own non-blocking stream.
// Starting it is collective over `comm`: rank 0 creates the NCCL unique id, MPI_Bcast sends it,
// every rank calls ncclCommInitRank. Every call is checked (RINGTRAIN_CUDA_CHECK/NCCL_CHECK).
class NcclChannel {
 public:
  NcclChannel(MPI_Comm comm, int device, std::string_view backend);
  ~NcclChannel();
  NcclChannel(const NcclChannel&) = delete;
  NcclChannel& operator=(const NcclChannel&) = delete;

  ncclComm_t nccl() const { return nccl_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }

  // Makes this device current and the stream wait, on the device, for the work queued on
  // `compute` so far (nullptr: the legacy default stream): the host does not synchronise it.
  void orderAfter(cudaStream_t compute);
  // Makes this device current (before queueing work that need not wait for the compute stream).
  void useDevice();
  // Returns when everything queued on the stream has finished. Meanwhile the host polls
  // ncclCommGetAsyncError: an asynchronous NCCL error (a peer died, a network failure) aborts the
  // NCCL communicator and the job, naming `what`, instead of hanging.
  void wait(const std::string& what, WaitMode mode);

 private:
  std::string backend_;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t done_ = nullptr;
  ncclComm_t nccl_ = nullptr;
};

}  // namespace ringtrain::collectives
