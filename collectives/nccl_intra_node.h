// NcclIntraNode: the inside-the-node stages of a hierarchical all-reduce for device buffers, with
// NCCL on a communicator of the node's ranks (GPU builds only; the `hierarchical-nccl` backend).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "collectives/communicator.h"
#include "collectives/intra_node_collectives.h"
#include "collectives/nccl_channel.h"

namespace ringtrain::collectives {

// Stage 1 is ncclReduceScatter and stage 3 ncclAllGather on the node's NCCL communicator; the
// slice a rank carries across nodes goes to pinned host memory (cudaMemcpyAsync, then a wait)
// for HierarchicalAllreduce's MPI all-reduce and back: Horovod's hierarchical all-reduce. Nodes
// smaller than the largest take ncclAllReduce and ncclBroadcast instead.
//
// NCCL's reduce-scatter cuts a buffer into equal blocks, SliceLayout into blocks of `stride`
// whose last ones may be short. When count == stride * slices the stages work on the caller's
// buffers directly; otherwise on a device buffer padded to stride * slices (two more device
// copies per stage). For 4-byte types and counts that are multiples of 16 * slices (the
// benchmark's power-of-two sizes) no padding is needed.
//
// The GPU is the rank's local rank in `nodeComm` modulo the visible devices (chooseNodeDevice):
// with simulated nodes (options.test.ranksPerNode) the simulated local rank, so 2 ranks as 2 nodes
// x 1 run on one GPU; two ranks of one (real or simulated) node on one GPU are refused. Work
// starts after the work queued on the legacy default stream (setComputeStream changes it);
// every call returns when its work has finished.
class NcclIntraNode final : public IntraNodeCollectives {
 public:
  NcclIntraNode(MPI_Comm nodeComm, const CommunicatorOptions& options);
  ~NcclIntraNode() override;
  NcclIntraNode(const NcclIntraNode&) = delete;
  NcclIntraNode& operator=(const NcclIntraNode&) = delete;

  int device() const { return channel_->device(); }
  void setComputeStream(cudaStream_t stream) { computeStream_ = stream; }

  int localRank() const override { return localRank_; }
  int localSize() const override { return localSize_; }
  void reduceScatter(const void* send, void* recv, const SliceLayout& layout, DataType type,
                     ReduceOp op) override;
  void allgather(void* buffer, const SliceLayout& layout, DataType type) override;
  void allreduce(const void* send, void* recv, std::size_t count, DataType type,
                 ReduceOp op) override;
  void broadcast(void* buffer, std::size_t count, DataType type, int localRoot) override;
  bool takesDeviceBuffers() const override { return true; }
  std::string bufferProblem(const void* buffer, std::size_t count, const char* what) const override;
  std::byte* hostCopyOf(void* data, std::size_t bytes) override;
  void copy(void* destination, const void* source, std::size_t bytes) override;

 private:
  // A device buffer of at least `bytes` bytes (kept and grown, never shrunk).
  std::byte* padded(std::size_t bytes);
  void wait(const char* what);

  int localRank_ = 0;
  int localSize_ = 1;
  WaitMode waitMode_;
  std::unique_ptr<NcclChannel> channel_;
  cudaStream_t computeStream_ = nullptr;
  std::byte* padded_ = nullptr;  // cudaMalloc
  std::size_t paddedBytes_ = 0;
  std::byte* staging_ = nullptr;  // cudaMallocHost (pinned)
  std::size_t stagingBytes_ = 0;
};

// The IntraNodeFactory of `hierarchical-nccl`.
std::unique_ptr<IntraNodeCollectives> makeNcclIntraNode(MPI_Comm nodeComm,
                                                        const CommunicatorOptions& options);

}  // namespace ringtrain::collectives
