// RingChunking: how long the ring's messages are on each side of a rank, chosen by where its two
// neighbours run.
#pragma once

#include <cstddef>

#include <mpi.h>

#include "collectives/communicator.h"

namespace ringtrain::collectives {

// Messages to a neighbour on the same node travel through shared memory, where fewer, larger
// messages are cheaper (options.ringChunkBytes). Messages to a neighbour on another node travel
// over the network in chunks of options.ringNetworkChunkBytes, small enough that Open MPI's TCP
// transport sends them eagerly: above its eager limit a message waits for the receiver's go-ahead,
// and between two hosts that go-ahead queues behind the other direction's bulk data on the one
// TCP connection they share, which leaves the link idle meanwhile.
//
// Each hop must be cut the same way at both ends, or the receiver's messages would not match
// the sender's: the sender cuts by where its RIGHT neighbour is, the receiver by where its LEFT
// neighbour is, and both see the same answer ("the two of us share a node or not").
struct RingChunking {
  std::size_t receiveBytes = 0;  // messages from the left neighbour
  std::size_t sendBytes = 0;     // messages to the right neighbour
  int receiveDepth = 1;          // receives from the left neighbour in flight
};

// The same chunks on both sides (a ring whose ranks all share a node).
RingChunking sharedMemoryChunking(const CommunicatorOptions& options);

// Collective over `comm`: finds which ranks share a node (MPI_COMM_TYPE_SHARED, or
// options.test.ranksPerNode consecutive ranks in tests and benchmarks) and chooses each side's
// chunks. The receive depth keeps as many bytes in flight as ringPipelineDepth chunks of
// ringChunkBytes do, so that smaller network chunks do not leave the link idle.
RingChunking ringChunking(MPI_Comm comm, const CommunicatorOptions& options);

}  // namespace ringtrain::collectives
