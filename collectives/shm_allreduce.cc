#include "collectives/shm_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/aligned_buffer.h"
#include "collectives/communicator.h"
#include "collectives/reduce_kernels.h"

namespace ringtrain::collectives {

ShmAllreduce::ShmAllreduce(const SharedMemoryWindow& window, std::size_t chunkBytes,
                           WaitMode waitMode)
    : window_(window), chunkBytes_(chunkBytes), waitMode_(waitMode) {}

std::byte* ShmAllreduce::slot(int rank) const {
  return window_.region(rank) + (rounds_ & 1) * chunkBytes_;
}

void ShmAllreduce::checkSignatures(const CallSignature& mine) const {
  const int parity = static_cast<int>(rounds_ & 1);
  bool agree = true;
  for (int r = 0; r < window_.size(); ++r)
    agree = agree && window_.signature(r, parity) == mine;
  if (agree) return;
  std::vector<CallSignature> all;
  for (int r = 0; r < window_.size(); ++r)
    all.push_back(window_.signature(r, parity));
  throw CollectiveMismatchError(disagreementMessage(all));
}

// Elements [begin, end) of the current chunk, reduced into this rank's slot.
void ShmAllreduce::reduceSegment(std::size_t begin, std::size_t end, DataType type,
                                 ReduceOp op) const {
  const int n = window_.size();
  const int me = window_.rank();
  const std::size_t elementSize = sizeOf(type);
  std::byte* out = slot(me) + begin * elementSize;
  int remaining = n - 1;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const bool last = --remaining == 0;
    // The last partial result is what the peers copy out next: stream it past this core's cache
    // (see StoreMode::kStreaming) rather than make them fetch it line by line from here.
    reduceArrays(type, op, out, slot(r) + begin * elementSize, out, end - begin,
                 last && op == ReduceOp::kAverage ? n : 1,
                 last ? StoreMode::kStreaming : StoreMode::kCached);
  }
}

void ShmAllreduce::run(const CallSignature& signature, const void* send, void* recv,
                       std::size_t count, DataType type, ReduceOp op) {
  const int n = window_.size();
  const std::size_t elementSize = sizeOf(type);
  const std::size_t chunkElements = chunkBytes_ / elementSize;
  const std::size_t lineElements = AlignedBuffer::kAlignment / elementSize;
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  std::size_t done = 0;
  bool first = true;
  do {
    const std::size_t chunk = std::min(chunkElements, count - done);
    if (chunk > 0)
      streamingCopy(slot(window_.rank()), in + done * elementSize, chunk * elementSize);
    if (first) window_.signature(window_.rank(), static_cast<int>(rounds_ & 1)) = signature;
    arrive();
    if (first) {
      try {
        checkSignatures(signature);
      } catch (const CollectiveMismatchError&) {
        ++rounds_;  // every rank leaves here, after the same arrivals: parity stays in step
        throw;
      }
    }
    // Segments start on cache-line boundaries, so that no two ranks write the same line.
    const std::size_t stride =
        ((chunk + n - 1) / n + lineElements - 1) / lineElements * lineElements;
    const std::size_t mine = std::min(chunk, stride * static_cast<std::size_t>(window_.rank()));
    reduceSegment(mine, std::min(chunk, mine + stride), type, op);
    arrive();
    for (int s = 0; s < n; ++s) {
      const std::size_t begin = std::min(chunk, stride * static_cast<std::size_t>(s));
      const std::size_t end = std::min(chunk, begin + stride);
      if (end == begin) continue;
      std::memcpy(out + (done + begin) * elementSize, slot(s) + begin * elementSize,
                  (end - begin) * elementSize);
    }
    ++rounds_;
    done += chunk;
    first = false;
  } while (done < count);
}

}  // namespace ringtrain::collectives
