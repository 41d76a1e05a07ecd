#include "collectives/nccl_intra_node.h"

#include "collectives/cuda_check.h"
#include "collectives/mpi_check.h"

namespace ringtrain::collectives {
namespace {

constexpr std::string_view kBackend = "hierarchical-nccl";

}  // namespace

NcclIntraNode::NcclIntraNode(MPI_Comm nodeComm, const CommunicatorOptions& options)
    : waitMode_(options.yieldWhileWaiting ? WaitMode::kYield : WaitMode::kSpin) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(nodeComm, &localRank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(nodeComm, &localSize_));
  channel_ =
      std::make_unique<NcclChannel>(nodeComm, chooseNodeDevice(nodeComm, kBackend), kBackend);
}

NcclIntraNode::~NcclIntraNode() {
  // No aborting in a destructor: errors here are reported by the next call that fails.
  if (padded_ != nullptr) cudaFree(padded_);
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

std::byte* NcclIntraNode::padded(std::size_t bytes) {
  if (bytes > paddedBytes_) {
    if (padded_ != nullptr) RINGTRAIN_CUDA_CHECK(cudaFree(padded_));
    padded_ = nullptr;
    RINGTRAIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&padded_), bytes));
    paddedBytes_ = bytes;
  }
  return padded_;
}

void NcclIntraNode::wait(const char* what) {
  channel_->wait(std::string("intra-node ") + what, waitMode_);
}

// Slice r of the (padded) buffer is NCCL's block r: recvbuff = sendbuff + r * stride is NCCL's
// in-place reduce-scatter, and on a padded copy the tail beyond `count` is zeroed scratch whose
// results nobody reads.
void NcclIntraNode::reduceScatter(const void* send, void* recv, const SliceLayout& layout,
                                  DataType type, ReduceOp op) {
  if (layout.count == 0) return;
  const std::size_t e = sizeOf(type);
  const std::size_t blockBytes = layout.stride * e;
  const std::size_t own = static_cast<std::size_t>(localRank_) * blockBytes;
  const ncclRedOp_t reduction = ncclOp(type, op, kBackend);
  auto* out = static_cast<std::byte*>(recv);
  channel_->orderAfter(computeStream_);
  const cudaStream_t stream = channel_->stream();
  if (layout.stride * static_cast<std::size_t>(layout.slices) == layout.count) {
    RINGTRAIN_NCCL_CHECK(ncclReduceScatter(send, out + own, layout.stride, ncclType(type),
                                           reduction, channel_->nccl(), stream));
  } else {
    const std::size_t countBytes = layout.count * e;
    const std::size_t paddedBytes = blockBytes * static_cast<std::size_t>(layout.slices);
    std::byte* scratch = padded(paddedBytes);
    RINGTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(scratch, send, countBytes, cudaMemcpyDeviceToDevice, stream));
    RINGTRAIN_CUDA_CHECK(
        cudaMemsetAsync(scratch + countBytes, 0, paddedBytes - countBytes, stream));
    RINGTRAIN_NCCL_CHECK(ncclReduceScatter(scratch, scratch + own, layout.stride, ncclType(type),
                                           reduction, channel_->nccl(), stream));
    const std::size_t ownBytes = layout.length(localRank_) * e;
    if (ownBytes > 0) {
      RINGTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(out + own, scratch + own, ownBytes, cudaMemcpyDeviceToDevice, stream));
    }
  }
  wait("reduce-scatter");
}

void NcclIntraNode::allgather(void* buffer, const SliceLayout& layout, DataType type) {
  if (layout.count == 0) return;
  const std::size_t e = sizeOf(type);
  const std::size_t blockBytes = layout.stride * e;
  const std::size_t own = static_cast<std::size_t>(localRank_) * blockBytes;
  auto* data = static_cast<std::byte*>(buffer);
  channel_->useDevice();
  const cudaStream_t stream = channel_->stream();
  if (layout.stride * static_cast<std::size_t>(layout.slices) == layout.count) {
    RINGTRAIN_NCCL_CHECK(
        ncclAllGather(data + own, data, layout.stride, ncclType(type), channel_->nccl(), stream));
  } else {
    // The padded buffer's block r still holds stage 1's result, but the slice in `buffer` has
    // been through stage 2 since: copy it again.
    std::byte* scratch = padded(blockBytes * static_cast<std::size_t>(layout.slices));
    const std::size_t ownBytes = layout.length(localRank_) * e;
    if (ownBytes > 0) {
      RINGTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(scratch + own, data + own, ownBytes, cudaMemcpyDeviceToDevice, stream));
    }
    RINGTRAIN_NCCL_CHECK(ncclAllGather(scratch + own, scratch, layout.stride, ncclType(type),
                                       channel_->nccl(), stream));
    RINGTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(data, scratch, layout.count * e, cudaMemcpyDeviceToDevice, stream));
  }
  wait("all-gather");
}

void NcclIntraNode::allreduce(const void* send, void* recv, std::size_t count, DataType type,
                              ReduceOp op) {
  const ncclRedOp_t reduction = ncclOp(type, op, kBackend);
  channel_->orderAfter(computeStream_);
  RINGTRAIN_NCCL_CHECK(ncclAllReduce(send, recv, count, ncclType(type), reduction, channel_->nccl(),
                                     channel_->stream()));
  wait("all-reduce");
}

void NcclIntraNode::broadcast(void* buffer, std::size_t count, DataType type, int localRoot) {
  if (localSize_ == 1) return;
  channel_->useDevice();
  RINGTRAIN_NCCL_CHECK(ncclBroadcast(buffer, buffer, count, ncclType(type), localRoot,
                                     channel_->nccl(), channel_->stream()));
  wait("broadcast");
}

std::string NcclIntraNode::bufferProblem(const void* buffer, std::size_t count,
                                         const char* what) const {
  return deviceBufferProblem(buffer, count, kBackend, what);
}

std::byte* NcclIntraNode::hostCopyOf(void* data, std::size_t bytes) {
  if (bytes > stagingBytes_) {
    if (staging_ != nullptr) RINGTRAIN_CUDA_CHECK(cudaFreeHost(staging_));
    staging_ = nullptr;
    RINGTRAIN_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&staging_), bytes));
    stagingBytes_ = bytes;
  }
  if (bytes == 0) return staging_;
  // Broadcast and all-gather read the caller's buffer here first: wait for the compute stream.
  channel_->orderAfter(computeStream_);
  RINGTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(staging_, data, bytes, cudaMemcpyDeviceToHost, channel_->stream()));
  wait("copy to host");
  return staging_;
}

void NcclIntraNode::copy(void* destination, const void* source, std::size_t bytes) {
  if (destination == source || bytes == 0) return;
  channel_->useDevice();
  RINGTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, channel_->stream()));
  wait("copy");
}

std::unique_ptr<IntraNodeCollectives> makeNcclIntraNode(MPI_Comm nodeComm,
                                                        const CommunicatorOptions& options) {
  return std::make_unique<NcclIntraNode>(nodeComm, options);
}

}  // namespace ringtrain::collectives
