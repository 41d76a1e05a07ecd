// The collectives of device buffers behind the named operations (ringtrain.h's Operation with a
// `device`): NCCL over one process set's ranks, one GPU per rank. This header includes no CUDA:
// builds without the GPU path compile against it too, and there deviceCollectivesBuilt() is false
// and makeDeviceCollectives throws.
//
// The arithmetic around NCCL's sum is the host path's, written as CUDA kernels
// (device_kernels.cu): Horovod's scaling (api/element_math.cc's scale) and the average as a sum
// divided by the ranks' count (a true division, as collectives/reduce_kernels.cc divides), so that
// a result equals the host path's bit for bit where the sums run in the same order (one or two
// ranks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

namespace ringtrain::collectives {

// The element types NCCL reduces (no 16-bit integers, no bool: a caller maps bool to kUInt8).
enum class DeviceElement { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kInt8 };
// kAverage: the sum divided by the ranks' count (integers truncate toward zero).
enum class DeviceReduction { kSum, kAverage, kMin, kMax, kProduct };

std::size_t elementBytes(DeviceElement type);

// Whether this build has the GPU path; NCCL's version code (22809 for 2.28.9) of the library
// loaded, 0 without the GPU path. Neither needs a GPU.
bool deviceCollectivesBuilt();
int ncclVersionCode();

// "" when [data, data + bytes) is memory of CUDA device `device` (or bytes is 0); otherwise what
// is wrong, for an error naming the call. Not collective.
std::string devicePointerProblem(const void* data, std::size_t bytes, int device);

// Device memory that a result owns: freed with its last copy (cudaFree, which first waits for the
// device's queued work, so a tensor over it may be dropped while kernels still read it).
using DeviceBytes = std::shared_ptr<void>;

// Rows of dimension 0, as the named operations cut them: `rows` of `rowBytes` bytes per rank.
struct RowCounts {
  std::vector<std::int64_t> rows;  // by rank of the set
  std::size_t rowBytes = 0;
};

// One process set's NCCL communicator and stream on this rank's device. Every call is collective
// over the set's ranks, made in the same order everywhere with arguments the ranks agree on (the
// named operations check that from the signatures first: NCCL itself would hang). Each call first
// makes NCCL's stream wait, on the device, for `ready` (a cudaEvent_t recorded after the input was
// written; 0: none), and returns once its work on the device has finished, polling NCCL for
// asynchronous errors meanwhile (such an error ends the job, naming the call).
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual int device() const = 0;

  // output = scale(op over ranks of scale(input, prescale)), postscale): `count` elements, in
  // place when input == output.
  virtual void allreduce(const void* input, void* output, std::size_t count, DeviceElement type,
                         DeviceReduction op, double prescale, double postscale,
                         std::uintptr_t ready) = 0;
  // root's `bytes` bytes (root: its index in the set) from its input into every rank's output.
  virtual void broadcast(const void* input, void* output, std::size_t bytes, int root,
                         std::uintptr_t ready) = 0;
  // Every rank's rows, in rank order, in fresh device memory (null when there are none).
  virtual DeviceBytes allgather(const void* input, const RowCounts& counts,
                                std::uintptr_t ready) = 0;
  // sent.rows[j] rows to rank j (in order), received.rows[j] from it, into fresh device memory.
  virtual DeviceBytes alltoall(const void* input, const RowCounts& sent, const RowCounts& received,
                               std::uintptr_t ready) = 0;
  // The reduction (as allreduce's) of `count` elements cut by blocks.rows: this rank's block, in
  // fresh device memory (null when empty).
  virtual DeviceBytes reducescatter(const void* input, std::size_t count, const RowCounts& blocks,
                                    DeviceElement type, DeviceReduction op, double prescale,
                                    double postscale, std::uintptr_t ready) = 0;
};

// Collective over `comm` (ncclCommInitRank): NCCL over its ranks, this rank on CUDA device
// `device`. Throws std::runtime_error in a build without the GPU path.
std::unique_ptr<DeviceCollectives> makeDeviceCollectives(MPI_Comm comm, int device);

}  // namespace ringtrain::collectives
