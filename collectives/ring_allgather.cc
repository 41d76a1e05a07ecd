#include "collectives/ring_allgather.h"

#include <cstring>

namespace ringtrain::collectives {

void RingAllgather::run(const void* send, void* recv, std::size_t countPerRank, DataType type) {
  const std::size_t elementSize = sizeOf(type);
  const int rank = pipeline_.rank();
  auto* out = static_cast<std::byte*>(recv);
  std::byte* ownBlock = out + static_cast<std::size_t>(rank) * countPerRank * elementSize;
  if (send != ownBlock && countPerRank > 0) {
    std::memcpy(ownBlock, send, countPerRank * elementSize);
  }
  RingPass pass;
  pass.layout.count = static_cast<std::size_t>(pipeline_.size()) * countPerRank;
  pass.layout.stride = countPerRank;
  pass.type = type;
  pass.firstSegment = rank;
  pass.steps = pipeline_.size() - 1;
  pass.reduceSteps = 0;
  pass.firstSend = ownBlock;
  pass.out = out;
  pipeline_.run(pass);
}

}  // namespace ringtrain::collectives
