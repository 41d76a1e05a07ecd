// NamedOperations' device operations (Operation::device >= 0): NCCL over the process set's ranks
// through collectives::DeviceCollectives. As on the host, what each rank moves follows from the
// signatures every rank has seen, so every rank reaches the same NCCL calls, or the same error.
#include <algorithm>
#include <numeric>

#include "api/element_math.h"
#include "api/named_operations.h"

namespace ringtrain::api {
namespace {

using collectives::DeviceElement;
using collectives::DeviceReduction;

// bool travels as uint8; int16, which NCCL lacks, was refused by submit().
DeviceElement deviceElement(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return DeviceElement::kFloat32;
    case DataType::kFloat64:
      return DeviceElement::kFloat64;
    case DataType::kFloat16:
      return DeviceElement::kFloat16;
    case DataType::kBFloat16:
      return DeviceElement::kBFloat16;
    case DataType::kInt32:
      return DeviceElement::kInt32;
    case DataType::kInt64:
      return DeviceElement::kInt64;
    case DataType::kUInt8:
    case DataType::kBool:
      return DeviceElement::kUInt8;
    case DataType::kInt8:
      return DeviceElement::kInt8;
    case DataType::kInt16:
      break;
  }
  throw Error("ringtrain: " + typeName(type) + " has no GPU path");
}

// On bool (0 or 1), sum and max are "or", min and product "and", as the host path has them.
DeviceReduction deviceReduction(DataType type, ReduceOp op) {
  if (type == DataType::kBool) {
    const bool orLike = op == ReduceOp::kSum || op == ReduceOp::kMax;
    return orLike ? DeviceReduction::kMax : DeviceReduction::kMin;
  }
  switch (op) {
    case ReduceOp::kSum:
      return DeviceReduction::kSum;
    case ReduceOp::kAverage:
      return DeviceReduction::kAverage;
    case ReduceOp::kMin:
      return DeviceReduction::kMin;
    case ReduceOp::kMax:
      return DeviceReduction::kMax;
    case ReduceOp::kProduct:
      return DeviceReduction::kProduct;
  }
  return DeviceReduction::kSum;
}

// The host path does not scale bool.
double scaling(DataType type, double factor) {
  return type == DataType::kBool ? 1.0 : factor;
}

}  // namespace

// The set's NCCL communicator, made at the set's first device operation: collective over the set,
// which every rank of it reaches together (they run the set's operations in the same order). Each
// rank stays on the device it took then: an NCCL communicator is bound to one.
collectives::DeviceCollectives& NamedOperations::deviceCollectives(const Item& item,
                                                                   ProcessSet& target) {
  const auto deviceOf = [&](std::size_t i) {
    return item.ready->entry.byRank[static_cast<std::size_t>(target.ranks[i])]->device;
  };
  if (!target.gpu) {
    target.gpuDevices.clear();
    for (std::size_t i = 0; i < target.ranks.size(); ++i)
      target.gpuDevices.push_back(deviceOf(i));
    const int mine = target.gpuDevices[static_cast<std::size_t>(target.index)];
    target.gpu = translated([&] { return collectives::makeDeviceCollectives(target.comm, mine); });
  }
  for (std::size_t i = 0; i < target.ranks.size(); ++i) {
    if (deviceOf(i) == target.gpuDevices[i]) continue;
    const Signature& s = *item.agreed;
    throw Error(std::string("ringtrain: ") + kindName(s.kind) + " '" + s.name + "': rank " +
                std::to_string(target.ranks[i]) + "'s tensor is on CUDA device " +
                std::to_string(deviceOf(i)) + ", but its NCCL communicator of process set " +
                std::to_string(s.processSet) + " is on device " +
                std::to_string(target.gpuDevices[i]) +
                " (one GPU per rank: keep each rank's tensors on one device)");
  }
  return *target.gpu;
}

OperationResult NamedOperations::runOnDevice(const Item& item, ProcessSet& target) {
  const Signature& s = *item.agreed;
  collectives::DeviceCollectives& gpu = deviceCollectives(item, target);
  const Operation& op = item.slot->operation;  // device operations have no stand-ins
  const auto& byRank = item.ready->entry.byRank;
  const std::size_t n = target.ranks.size();
  const auto count = static_cast<std::size_t>(elements(s.shape));
  const std::size_t rowBytes = static_cast<std::size_t>(rowElements(s.shape)) * sizeOf(s.type);
  OperationResult result;
  result.shape = s.shape;
  switch (s.kind) {
    case OperationKind::kAllreduce:
      gpu.allreduce(op.input, op.output, count, deviceElement(s.type),
                    deviceReduction(s.type, s.op), scaling(s.type, s.prescale),
                    scaling(s.type, s.postscale), op.readyEvent);
      return {};
    case OperationKind::kBroadcast: {
      const auto root = std::find(target.ranks.begin(), target.ranks.end(), s.root);
      gpu.broadcast(op.input, op.output, count * sizeOf(s.type),
                    static_cast<int>(root - target.ranks.begin()), op.readyEvent);
      return {};
    }
    case OperationKind::kAllgather: {
      collectives::RowCounts rows{{}, rowBytes};
      for (int r : target.ranks)
        rows.rows.push_back(byRank[static_cast<std::size_t>(r)]->shape[0]);
      result.shape[0] = std::accumulate(rows.rows.begin(), rows.rows.end(), std::int64_t{0});
      result.deviceData = gpu.allgather(op.input, rows, op.readyEvent);
      return result;
    }
    case OperationKind::kAlltoall: {
      const Signature& mine = *byRank[static_cast<std::size_t>(target.ranks[target.index])];
      collectives::RowCounts sent{rowSplits(mine, n), rowBytes}, received{{}, rowBytes};
      for (int r : target.ranks) {
        received.rows.push_back(rowSplits(*byRank[static_cast<std::size_t>(r)],
                                          n)[static_cast<std::size_t>(target.index)]);
      }
      result.receivedSplits = received.rows;
      result.shape[0] =
          std::accumulate(received.rows.begin(), received.rows.end(), std::int64_t{0});
      result.deviceData = gpu.alltoall(op.input, sent, received, op.readyEvent);
      return result;
    }
    case OperationKind::kReducescatter: {
      collectives::RowCounts blocks{{}, rowBytes};
      for (std::size_t r = 0; r < n; ++r) {
        blocks.rows.push_back(
            rowBlock(s.shape[0], static_cast<std::int64_t>(n), static_cast<std::int64_t>(r)).count);
      }
      result.shape[0] = blocks.rows[static_cast<std::size_t>(target.index)];
      result.deviceData = gpu.reducescatter(
          op.input, count, blocks, deviceElement(s.type), deviceReduction(s.type, s.op),
          scaling(s.type, s.prescale), scaling(s.type, s.postscale), op.readyEvent);
      return result;
    }
    default:
      return {};
  }
}

}  // namespace ringtrain::api
