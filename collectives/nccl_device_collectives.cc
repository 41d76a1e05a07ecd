// DeviceCollectives over NCCL (GPU builds only): the named operations' device path.
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "collectives/cuda_check.h"
#include "collectives/device_collectives.h"
#include "collectives/device_kernels.h"
#include "collectives/mpi_check.h"
#include "collectives/nccl_channel.h"

namespace ringtrain::collectives {
namespace {

constexpr std::string_view kWho = "named operations' nccl";

ncclDataType_t ncclElement(DeviceElement type) {
  switch (type) {
    case DeviceElement::kFloat32:
      return ncclFloat32;
    case DeviceElement::kFloat64:
      return ncclFloat64;
    case DeviceElement::kFloat16:
      return ncclFloat16;
    case DeviceElement::kBFloat16:
      return ncclBfloat16;
    case DeviceElement::kInt32:
      return ncclInt32;
    case DeviceElement::kInt64:
      return ncclInt64;
    case DeviceElement::kUInt8:
      return ncclUint8;
    case DeviceElement::kInt8:
      return ncclInt8;
  }
  return ncclUint8;
}

// The reduction NCCL runs: an average is NCCL's sum, divided by our kernel (NCCL's ncclAvg
// multiplies each input by 1/n first, which rounds differently from the host path).
ncclRedOp_t ncclReduction(DeviceReduction op) {
  switch (op) {
    case DeviceReduction::kSum:
    case DeviceReduction::kAverage:
      return ncclSum;
    case DeviceReduction::kMin:
      return ncclMin;
    case DeviceReduction::kMax:
      return ncclMax;
    case DeviceReduction::kProduct:
      return ncclProd;
  }
  return ncclSum;
}

bool isHalf(DeviceElement type) {
  return type == DeviceElement::kFloat16 || type == DeviceElement::kBFloat16;
}

unsigned char* at(const void* base, std::size_t offset) {
  return static_cast<unsigned char*>(const_cast<void*>(base)) + offset;
}

// Device memory of this rank's device, grown as needed and kept from call to call.
class Scratch {
 public:
  ~Scratch() {
    if (data_) cudaFree(data_);  // no aborting in a destructor
  }
  void* get(std::size_t bytes) {
    if (bytes > bytes_) {
      if (data_) RINGTRAIN_CUDA_CHECK(cudaFree(data_));
      data_ = nullptr;
      RINGTRAIN_CUDA_CHECK(cudaMalloc(&data_, bytes));
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

DeviceBytes allocateResult(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* data = nullptr;
  RINGTRAIN_CUDA_CHECK(cudaMalloc(&data, bytes));
  // Freed from whichever thread drops the last copy; cudaFree waits for the device's work. Its
  // error at exit (the runtime already unloaded) is ignored: there is nothing left to free.
  return DeviceBytes(data, [](void* p) { (void)cudaFree(p); });
}

std::vector<std::size_t> offsetsOf(const RowCounts& counts) {
  std::vector<std::size_t> offsets(counts.rows.size() + 1, 0);
  for (std::size_t r = 0; r < counts.rows.size(); ++r)
    offsets[r + 1] = offsets[r] + static_cast<std::size_t>(counts.rows[r]) * counts.rowBytes;
  return offsets;
}

class NcclDeviceCollectives final : public DeviceCollectives {
 public:
  NcclDeviceCollectives(MPI_Comm comm, int device) : channel_(comm, device, kWho) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
    RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size_));
  }
  int device() const override { return channel_.device(); }

  void allreduce(const void* input, void* output, std::size_t count, DeviceElement type,
                 DeviceReduction op, double prescale, double postscale,
                 std::uintptr_t ready) override {
    begin(ready);
    if (output != input && count > 0) {
      RINGTRAIN_CUDA_CHECK(cudaMemcpyAsync(output, input, count * elementBytes(type),
                                           cudaMemcpyDeviceToDevice, stream()));
    }
    scaleOnDevice(output, count, type, prescale, stream());
    reduceInPlace(output, count, type, op);
    scaleOnDevice(output, count, type, postscale, stream());
    finish("all-reduce");
  }

  void broadcast(const void* input, void* output, std::size_t bytes, int root,
                 std::uintptr_t ready) override {
    begin(ready);
    if (size_ == 1 && input != output && bytes > 0) {
      RINGTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(output, input, bytes, cudaMemcpyDeviceToDevice, stream()));
    } else if (size_ > 1 && bytes > 0) {
      RINGTRAIN_NCCL_CHECK(
          ncclBroadcast(input, output, bytes, ncclUint8, root, channel_.nccl(), stream()));
    }
    finish("broadcast");
  }

  DeviceBytes allgather(const void* input, const RowCounts& counts, std::uintptr_t ready) override {
    begin(ready);
    const std::vector<std::size_t> offsets = offsetsOf(counts);
    DeviceBytes result = allocateResult(offsets.back());
    // Each rank's block broadcast from it, all in one group (the blocks may differ in size).
    RINGTRAIN_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      const std::size_t bytes = offsets[r + 1] - offsets[r];
      if (bytes == 0) continue;
      if (size_ == 1) {
        RINGTRAIN_CUDA_CHECK(
            cudaMemcpyAsync(result.get(), input, bytes, cudaMemcpyDeviceToDevice, stream()));
      } else {
        RINGTRAIN_NCCL_CHECK(ncclBroadcast(input, at(result.get(), offsets[r]), bytes, ncclUint8, r,
                                           channel_.nccl(), stream()));
      }
    }
    RINGTRAIN_NCCL_CHECK(ncclGroupEnd());
    finish("all-gather");
    return result;
  }

  DeviceBytes alltoall(const void* input, const RowCounts& sent, const RowCounts& received,
                       std::uintptr_t ready) override {
    begin(ready);
    const std::vector<std::size_t> from = offsetsOf(sent), to = offsetsOf(received);
    DeviceBytes result = allocateResult(to.back());
    const std::size_t own = to[rank_ + 1] - to[rank_];
    if (own > 0) {
      RINGTRAIN_CUDA_CHECK(cudaMemcpyAsync(at(result.get(), to[rank_]), at(input, from[rank_]), own,
                                           cudaMemcpyDeviceToDevice, stream()));
    }
    RINGTRAIN_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      if (const std::size_t bytes = from[r + 1] - from[r]; bytes > 0) {
        RINGTRAIN_NCCL_CHECK(
            ncclSend(at(input, from[r]), bytes, ncclUint8, r, channel_.nccl(), stream()));
      }
      if (const std::size_t bytes = to[r + 1] - to[r]; bytes > 0) {
        RINGTRAIN_NCCL_CHECK(
            ncclRecv(at(result.get(), to[r]), bytes, ncclUint8, r, channel_.nccl(), stream()));
      }
    }
    RINGTRAIN_NCCL_CHECK(ncclGroupEnd());
    finish("all-to-all");
    return result;
  }

  DeviceBytes reducescatter(const void* input, std::size_t count, const RowCounts& blocks,
                            DeviceElement type, DeviceReduction op, double prescale,
                            double postscale, std::uintptr_t ready) override;

 private:
  cudaStream_t stream() const { return channel_.stream(); }

  // This device current, and NCCL's stream after the caller's ready event.
  void begin(std::uintptr_t ready) {
    channel_.useDevice();
    if (ready != 0) {
      RINGTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream(), reinterpret_cast<cudaEvent_t>(ready), 0));
    }
  }
  void finish(const char* what) {
    channel_.wait(std::string(what) + " #" + std::to_string(++calls_), WaitMode::kYield);
  }

  // buffer = op over the ranks of buffer, in place (queued on the stream).
  void reduceInPlace(void* buffer, std::size_t count, DeviceElement type, DeviceReduction op);
  // Each block of `data` (elements, in order) reduced onto the rank it belongs to, in one group.
  void reduceBlocks(void* data, const std::vector<std::size_t>& firsts, DeviceElement type,
                    DeviceReduction op);

  NcclChannel channel_;
  int rank_ = 0, size_ = 1;
  std::uint64_t calls_ = 0;
  Scratch work_, wide_;
};

void NcclDeviceCollectives::reduceInPlace(void* buffer, std::size_t count, DeviceElement type,
                                          DeviceReduction op) {
  if (size_ == 1 || count == 0) return;
  if (op == DeviceReduction::kAverage && isHalf(type)) {
    // Summed and divided in float32, rounded to 16 bits once, as the host path's last step does.
    auto* wide = static_cast<float*>(wide_.get(count * sizeof(float)));
    widenOnDevice(buffer, wide, count, type, stream());
    RINGTRAIN_NCCL_CHECK(
        ncclAllReduce(wide, wide, count, ncclFloat32, ncclSum, channel_.nccl(), stream()));
    divideOnDevice(wide, count, DeviceElement::kFloat32, size_, stream());
    narrowOnDevice(wide, buffer, count, type, stream());
    return;
  }
  RINGTRAIN_NCCL_CHECK(ncclAllReduce(buffer, buffer, count, ncclElement(type), ncclReduction(op),
                                     channel_.nccl(), stream()));
  if (op == DeviceReduction::kAverage) divideOnDevice(buffer, count, type, size_, stream());
}

void NcclDeviceCollectives::reduceBlocks(void* data, const std::vector<std::size_t>& firsts,
                                         DeviceElement type, DeviceReduction op) {
  const std::size_t unit = elementBytes(type);
  RINGTRAIN_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < size_; ++r) {
    const std::size_t count = firsts[r + 1] - firsts[r];
    if (count == 0) continue;
    void* block = at(data, firsts[r] * unit);
    RINGTRAIN_NCCL_CHECK(ncclReduce(block, block, count, ncclElement(type), ncclReduction(op), r,
                                    channel_.nccl(), stream()));
  }
  RINGTRAIN_NCCL_CHECK(ncclGroupEnd());
}

// As the host path: the whole input scaled, reduced block by block onto each block's rank, this
// rank's block (averaged and) scaled again. 16-bit averages go through float32 as in allreduce.
DeviceBytes NcclDeviceCollectives::reducescatter(const void* input, std::size_t count,
                                                 const RowCounts& blocks, DeviceElement type,
                                                 DeviceReduction op, double prescale,
                                                 double postscale, std::uintptr_t ready) {
  begin(ready);
  const std::size_t unit = elementBytes(type);
  const std::vector<std::size_t> offsets = offsetsOf(blocks);
  std::vector<std::size_t> firsts;  // in elements
  for (std::size_t offset : offsets)
    firsts.push_back(offset / unit);
  const std::size_t mine = firsts[rank_ + 1] - firsts[rank_];
  DeviceBytes result = allocateResult(mine * unit);
  if (count == 0) {
    finish("reduce-scatter");
    return result;
  }
  void* work = work_.get(count * unit);
  RINGTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(work, input, count * unit, cudaMemcpyDeviceToDevice, stream()));
  scaleOnDevice(work, count, type, prescale, stream());
  const bool widened = op == DeviceReduction::kAverage && isHalf(type);
  DeviceElement workType = type;
  if (widened) {
    auto* wide = static_cast<float*>(wide_.get(count * sizeof(float)));
    widenOnDevice(work, wide, count, type, stream());
    work = wide, workType = DeviceElement::kFloat32;
  }
  if (size_ > 1) reduceBlocks(work, firsts, workType, op);
  void* block = at(work, firsts[rank_] * elementBytes(workType));
  if (op == DeviceReduction::kAverage) divideOnDevice(block, mine, workType, size_, stream());
  if (widened) {
    narrowOnDevice(static_cast<const float*>(block), result.get(), mine, type, stream());
  } else if (mine > 0) {
    RINGTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(result.get(), block, mine * unit, cudaMemcpyDeviceToDevice, stream()));
  }
  scaleOnDevice(result.get(), mine, type, postscale, stream());
  finish("reduce-scatter");
  return result;
}

}  // namespace

bool deviceCollectivesBuilt() {
  return true;
}

int ncclVersionCode() {
  int version = 0;
  return ncclGetVersion(&version) == ncclSuccess ? version : 0;
}

std::string devicePointerProblem(const void* data, std::size_t bytes, int device) {
  if (bytes == 0) return "";
  const int holder = deviceHolding(data);
  if (holder == kNotDevice) return "the buffer is not CUDA device memory";
  if (holder != kManaged && holder != device) {
    return "the buffer lies on CUDA device " + std::to_string(holder) + ", not " +
           std::to_string(device);
  }
  return "";
}

std::unique_ptr<DeviceCollectives> makeDeviceCollectives(MPI_Comm comm, int device) {
  return std::make_unique<NcclDeviceCollectives>(comm, device);
}

}  // namespace ringtrain::collectives
