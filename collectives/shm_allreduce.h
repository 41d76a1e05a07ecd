// ShmAllreduce: all-reduce among the ranks of one node through shared memory, with no message
// passing at all.
//
// The buffer goes in rounds of at most chunkBytes. In a round every rank
//   1. copies its chunk of `send` into its own slot of the shared window,
//   2. arrives (an arrival counter in shared memory) and waits for all ranks,
//   3. reduces its segment of the chunk (the ranks' segments are disjoint, cache-line aligned)
//      from every rank's slot, its own first and then the others in rank order, into its own
//      slot, dividing once at the end for an average,
//   4. arrives and waits again,
//   5. copies every rank's reduced segment out of that rank's slot into `recv`.
// Each segment is reduced by one rank only, so every rank copies out the same bits.
//
// Each rank's region holds two slots and rounds alternate between them (the round's parity).
// That makes two waits per round enough: a rank writes a slot again in round k + 2, after
// arriving in round k + 1's step 4, and every rank got there only after its step 5 of round k,
// the last read of that slot.
//
// The first round of every call compares the ranks' call signatures (written beside the slot,
// per parity, before step 2): a disagreement throws the same CollectiveMismatchError on every
// rank after step 2, before anyone reduces, and nobody touches the other parity's signatures
// before every rank has read this one's. A zero-count call still takes one (empty) round, so
// that it is checked too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/call_signature.h"
#include "collectives/data_type.h"
#include "collectives/request_wait.h"
#include "collectives/shared_memory_window.h"

namespace ringtrain::collectives {

class ShmAllreduce {
 public:
  // `window` must have regions of at least 2 * chunkBytes.
  ShmAllreduce(const SharedMemoryWindow& window, std::size_t chunkBytes, WaitMode waitMode);

  void run(const CallSignature& signature, const void* send, void* recv, std::size_t count,
           DataType type, ReduceOp op);

 private:
  std::byte* slot(int rank) const;
  void checkSignatures(const CallSignature& mine) const;
  void reduceSegment(std::size_t begin, std::size_t end, DataType type, ReduceOp op) const;
  void arrive() { window_.arriveAndWait(++epoch_, waitMode_); }

  const SharedMemoryWindow& window_;
  std::size_t chunkBytes_;
  WaitMode waitMode_;
  std::uint64_t rounds_ = 0;  // rounds done so far; its parity picks the slot
  std::uint64_t epoch_ = 0;   // arrivals so far
};

}  // namespace ringtrain::collectives
