// The `nccl` backend: all-reduce, broadcast and all-gather of device buffers with NCCL, one GPU
// per rank (GPU builds only).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "collectives/communicator.h"
#include "collectives/nccl_channel.h"
#include "collectives/recursive_doubling.h"

namespace ringtrain::collectives {

// Bootstrap (nccl_channel.h, shared with `hierarchical-nccl`): each rank takes GPU
// local_rank % device_count (local rank among the ranks sharing its node); rank 0 creates the NCCL
// unique id, MPI broadcasts it, every rank calls ncclCommInitRank. Rank 0 prints the NCCL version;
// NCCL_DEBUG=INFO makes NCCL say what it chose. Two ranks of a node on one GPU (more ranks than
// visible GPUs, or CUDA_VISIBLE_DEVICES showing them the same device) are refused before NCCL is
// touched: NCCL does not allow it.
//
// Buffers must be device (or managed) memory; a host pointer is refused with
// std::invalid_argument on its rank and CollectiveMismatchError on the others (none hangs). Types:
// float32, float64, float16, bfloat16, int32, int64; averages of floating-point types only (NCCL's
// ncclAvg). Like the ring backend, every collective first checks over MPI that all ranks call it
// with the same arguments (RecursiveDoubling): NCCL itself would hang or read out of bounds on a
// mismatch.
//
// Collectives run on this communicator's own stream. They start after the work already queued
// on the compute stream (setComputeStream): an event recorded there is waited for on the device,
// so the host does not synchronise the compute stream first. The calls return when the
// collective has finished (the Communicator contract); while waiting the host polls
// ncclCommGetAsyncError, and an asynchronous NCCL error (a peer died, a network failure) aborts
// the NCCL communicator and the job instead of hanging.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm comm, const CommunicatorOptions& options);
  std::string_view backendName() const override { return "nccl"; }

  int device() const override { return channel_.device(); }
  cudaStream_t stream() const { return channel_.stream(); }
  // The stream whose queued work produces the buffers (default: the legacy default stream).
  void setComputeStream(void* stream) override {
    computeStream_ = static_cast<cudaStream_t>(stream);
  }

 protected:
  void allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                     ReduceOp op) override;
  void broadcastImpl(void* buffer, std::size_t count, DataType type, int root) override;
  void allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                     DataType type) override;
  void barrierImpl() override;

 private:
  // The collective on this communicator's stream, after the compute stream's queued work;
  // returns when it has finished.
  template <class Enqueue>
  void runOnStream(const char* what, Enqueue enqueue);

  RecursiveDoubling agreement_;
  NcclChannel channel_;
  cudaStream_t computeStream_ = nullptr;
};

}  // namespace ringtrain::collectives
