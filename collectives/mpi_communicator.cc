#include "collectives/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "collectives/call_signature.h"
#include "collectives/mpi_check.h"
#include "collectives/recursive_doubling.h"
#include "collectives/reduce_kernels.h"

namespace ringtrain::collectives {
namespace {

// MPI counts are ints; larger buffers go in pieces of this many elements.
constexpr std::size_t kMaxElementsPerCall = std::size_t{1} << 30;

template <DataType kType, ReduceOp kOp>
void halfReduction(void* in, void* inout, int* length, MPI_Datatype*) {
  reduceArrays(kType, kOp, in, inout, inout, static_cast<std::size_t>(*length));
}

template <DataType kType>
std::array<MPI_Op, 3> createHalfOps() {
  std::array<MPI_Op, 3> ops{};
  RINGTRAIN_MPI_CHECK(MPI_Op_create(&halfReduction<kType, ReduceOp::kSum>, 1, &ops[0]));
  RINGTRAIN_MPI_CHECK(MPI_Op_create(&halfReduction<kType, ReduceOp::kMin>, 1, &ops[1]));
  RINGTRAIN_MPI_CHECK(MPI_Op_create(&halfReduction<kType, ReduceOp::kMax>, 1, &ops[2]));
  return ops;
}

MPI_Datatype createTwoByteType() {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  RINGTRAIN_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &type));
  RINGTRAIN_MPI_CHECK(MPI_Type_commit(&type));
  return type;
}

int asInt(std::size_t count) {
  return static_cast<int>(count);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const CommunicatorOptions& options)
    : Communicator(comm, options) {
  float16Type_ = createTwoByteType();
  bfloat16Type_ = createTwoByteType();
  halfOps_[0] = createHalfOps<DataType::kFloat16>();
  halfOps_[1] = createHalfOps<DataType::kBFloat16>();
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& ops : halfOps_) {
    for (auto& op : ops)
      MPI_Op_free(&op);
  }
  MPI_Type_free(&float16Type_);
  MPI_Type_free(&bfloat16Type_);
}

template <class Blocking, class NonBlocking>
void MpiCommunicator::run(Blocking blocking, NonBlocking nonBlocking) {
  if (waitMode() == WaitMode::kSpin) {
    RINGTRAIN_MPI_CHECK(blocking());
    return;
  }
  MPI_Request request;
  RINGTRAIN_MPI_CHECK(nonBlocking(&request));
  waitFor(&request, MPI_STATUS_IGNORE, WaitMode::kYield);
}

MPI_Datatype MpiCommunicator::mpiType(DataType type) const {
  switch (type) {
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat16:
      return float16Type_;
    case DataType::kBFloat16:
      return bfloat16Type_;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiCommunicator::mpiOp(DataType type, ReduceOp op) const {
  const int opIndex = op == ReduceOp::kMin ? 1 : op == ReduceOp::kMax ? 2 : 0;
  if (type == DataType::kFloat16) return halfOps_[0][opIndex];
  if (type == DataType::kBFloat16) return halfOps_[1][opIndex];
  return opIndex == 1 ? MPI_MIN : opIndex == 2 ? MPI_MAX : MPI_SUM;
}

void MpiCommunicator::agree(CollectiveKind kind, std::size_t count, DataType type, int op,
                            int root) {
  if (!options().mpiAgreement) return;
  const CallSignature mine = makeSignature(collectiveCount(), kind, count, type, op, root);
  const std::uint64_t token = agreementToken(mine);
  // The smallest token and the complement of the largest: equal tokens everywhere iff they meet.
  std::uint64_t bounds[2] = {token, ~token};
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_UINT64_T, MPI_MIN, comm()));
  if (bounds[0] != ~bounds[1]) throwDisagreement(mine, comm());
}

void MpiCommunicator::allreduceImpl(const void* send, void* recv, std::size_t count, DataType type,
                                    ReduceOp op) {
  agree(CollectiveKind::kAllreduce, count, type, static_cast<int>(op));
  const std::size_t elementSize = sizeOf(type);
  const MPI_Datatype datatype = mpiType(type);
  const MPI_Op mpiReduction = mpiOp(type, op);
  // One call even for count 0, so that every rank still takes part in the collective.
  std::size_t begin = 0;
  do {
    const std::size_t n = std::min(kMaxElementsPerCall, count - begin);
    auto* out = static_cast<std::byte*>(recv) + begin * elementSize;
    const void* in =
        send == recv ? MPI_IN_PLACE : static_cast<const std::byte*>(send) + begin * elementSize;
    run([&] { return MPI_Allreduce(in, out, asInt(n), datatype, mpiReduction, comm()); },
        [&](MPI_Request* r) {
          return MPI_Iallreduce(in, out, asInt(n), datatype, mpiReduction, comm(), r);
        });
    begin += n;
  } while (begin < count);
  if (op == ReduceOp::kAverage) divideArray(type, recv, count, size());
}

void MpiCommunicator::broadcastImpl(void* buffer, std::size_t count, DataType type, int root) {
  agree(CollectiveKind::kBroadcast, count, type, -1, root);
  const std::size_t elementSize = sizeOf(type);
  for (std::size_t begin = 0; begin < count; begin += kMaxElementsPerCall) {
    const std::size_t n = std::min(kMaxElementsPerCall, count - begin);
    void* data = static_cast<std::byte*>(buffer) + begin * elementSize;
    run([&] { return MPI_Bcast(data, asInt(n), mpiType(type), root, comm()); },
        [&](MPI_Request* r) { return MPI_Ibcast(data, asInt(n), mpiType(type), root, comm(), r); });
  }
}

void MpiCommunicator::allgatherImpl(const void* send, void* recv, std::size_t countPerRank,
                                    DataType type) {
  agree(CollectiveKind::kAllgather, countPerRank, type);
  if (countPerRank > static_cast<std::size_t>(INT_MAX)) {
    throw std::length_error("all-gather: the mpi backend takes at most 2^31-1 elements per rank");
  }
  const auto* ownBlock = static_cast<const std::byte*>(recv) + rank() * countPerRank * sizeOf(type);
  const void* in = send == ownBlock ? MPI_IN_PLACE : send;
  const MPI_Datatype t = mpiType(type);
  const int n = asInt(countPerRank);
  run([&] { return MPI_Allgather(in, n, t, recv, n, t, comm()); },
      [&](MPI_Request* r) { return MPI_Iallgather(in, n, t, recv, n, t, comm(), r); });
}

void MpiCommunicator::barrierImpl() {
  agree(CollectiveKind::kBarrier, 0, DataType::kFloat32);
  RINGTRAIN_MPI_CHECK(MPI_Barrier(comm()));
}

}  // namespace ringtrain::collectives
