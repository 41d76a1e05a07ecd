#include "collectives/nccl_communicator.h"

#include "collectives/cuda_check.h"
#include "collectives/mpi_check.h"

namespace ringtrain::collectives {
namespace {

constexpr std::string_view kBackend = "nccl";

// local_rank % device_count on the real node (MPI_COMM_TYPE_SHARED), refusing two local ranks on
// one GPU.
int deviceOfThisRank(MPI_Comm comm) {
  int rank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm node = MPI_COMM_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  const int device = chooseNodeDevice(node, kBackend);
  RINGTRAIN_MPI_CHECK(MPI_Comm_free(&node));
  return device;
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, const CommunicatorOptions& options)
    : Communicator(comm, options),
      agreement_(this->comm(), 0, waitMode()),
      channel_(this->comm(), deviceOfThisRank(this->comm()), kBackend) {
  if (rank() == 0) {
    logLine(LogLevel::kInfo, ncclVersionText() + ": " + std::to_string(size()) +
                                 " rank(s), one GPU each (NCCL_DEBUG=INFO shows NCCL's choices)");
  }
}

template <class Enqueue>
void NcclCommunicator::runOnStream(const char* what, Enqueue enqueue) {
  channel_.orderAfter(computeStream_);
  enqueue();
  channel_.wait(std::string(what) + " #" + std::to_string(collectiveCount()), waitMode());
}

void NcclCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                                     ReduceOp op) {
  std::string problem = deviceBufferProblem(send, count, kBackend, "all-reduce send");
  if (problem.empty()) problem = deviceBufferProblem(recv, count, kBackend, "all-reduce recv");
  agreeUnlessRefused(agreement_,
                     makeSignature(collectiveCount(), CollectiveKind::kAllreduce, count, type,
                                   static_cast<int>(op)),
                     problem);
  const ncclRedOp_t reduction = ncclOp(type, op, kBackend);
  runOnStream("all-reduce", [&] {
    // One rank's reduction is its input. NCCL 2.28.3 left the last count % 4 elements of a
    // one-rank out-of-place float32 average unwritten (H200, 2026-11-30), so copy instead.
    if (size() == 1) {
      if (send != recv) {
        RINGTRAIN_CUDA_CHECK(cudaMemcpyAsync(recv, send, count * sizeOf(type),
                                             cudaMemcpyDeviceToDevice, channel_.stream()));
      }
      return;
    }
    RINGTRAIN_NCCL_CHECK(ncclAllReduce(send, recv, count, ncclType(type), reduction,
                                       channel_.nccl(), channel_.stream()));
  });
}

void NcclCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type, int root) {
  agreeUnlessRefused(
      agreement_,
      makeSignature(collectiveCount(), CollectiveKind::kBroadcast, count, type, -1, root),
      deviceBufferProblem(buffer, count, kBackend, "broadcast"));
  runOnStream("broadcast", [&] {
    RINGTRAIN_NCCL_CHECK(ncclBroadcast(buffer, buffer, count, ncclType(type), root, channel_.nccl(),
                                       channel_.stream()));
  });
}

void NcclCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                     DataType type) {
  std::string problem = deviceBufferProblem(send, countPerRank, kBackend, "all-gather send");
  if (problem.empty()) {
    problem = deviceBufferProblem(recv, countPerRank * static_cast<std::size_t>(size()), kBackend,
                                  "all-gather recv");
  }
  agreeUnlessRefused(
      agreement_, makeSignature(collectiveCount(), CollectiveKind::kAllgather, countPerRank, type),
      problem);
  // In place (send == recv + rank * countPerRank) is NCCL's own in-place all-gather.
  runOnStream("all-gather", [&] {
    RINGTRAIN_NCCL_CHECK(ncclAllGather(send, recv, countPerRank, ncclType(type), channel_.nccl(),
                                       channel_.stream()));
  });
}

void NcclCommunicator::barrierImpl() {
  // Everything this communicator queued has finished when its calls return; MPI orders the hosts.
  RINGTRAIN_MPI_CHECK(MPI_Barrier(comm()));
}

}  // namespace ringtrain::collectives
