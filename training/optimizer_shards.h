// ZeRO-1's optimiser state between its shards and checkpoints, which hold it whole: a checkpoint
// of a sharded run resumes unsharded or on another number of ranks, and the other way round.
//
// Both move the state in pieces of kShardTransferElements, so that a rank other than 0 never
// holds more than one piece beside its shards.
#pragma once

#include <cstddef>
#include <memory>

#include "collectives/communicator.h"
#include "training/optimizer.h"

namespace ringtrain::training {

inline constexpr std::size_t kShardTransferElements = std::size_t{1} << 20;

// Collective over `comm`: rank 0's `whole` (an optimiser of every element, null elsewhere) takes
// every rank's shards of `sharded`, whose elements `index` says, and its step count.
void gatherShards(Optimizer& sharded, const StateIndex& index, Optimizer* whole,
                  collectives::Communicator& comm);
// Collective over `comm`: every rank's `sharded` takes its elements from rank 0's `whole`.
void scatterShards(Optimizer* whole, Optimizer& sharded, const StateIndex& index,
                   collectives::Communicator& comm);

}  // namespace ringtrain::training
