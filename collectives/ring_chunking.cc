#include "collectives/ring_chunking.h"

#include <algorithm>

#include "collectives/mpi_check.h"
#include "collectives/node_topology.h"

namespace ringtrain::collectives {

namespace {
std::size_t networkChunkBytes(const CommunicatorOptions& options) {
  return options.ringNetworkChunkBytes > 0 ? options.ringNetworkChunkBytes : options.ringChunkBytes;
}

// Enough receives of `chunkBytes` to hold what ringPipelineDepth chunks of ringChunkBytes hold.
int depthFor(std::size_t chunkBytes, const CommunicatorOptions& options) {
  const std::size_t bytes =
      static_cast<std::size_t>(std::max(options.ringPipelineDepth, 1)) * options.ringChunkBytes;
  const std::size_t chunks = (bytes + chunkBytes - 1) / std::max<std::size_t>(chunkBytes, 1);
  return static_cast<int>(std::max<std::size_t>(chunks, 1));
}
}  // namespace

RingChunking sharedMemoryChunking(const CommunicatorOptions& options) {
  return {options.ringChunkBytes, options.ringChunkBytes, std::max(options.ringPipelineDepth, 1)};
}

RingChunking ringChunking(MPI_Comm comm, const CommunicatorOptions& options) {
  int rank = 0;
  int size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  const std::vector<int> nodes = nodeOfEachRank(comm, options.test.ranksPerNode);
  const bool leftRemote = nodes[(rank - 1 + size) % size] != nodes[rank];
  const bool rightRemote = nodes[(rank + 1) % size] != nodes[rank];
  RingChunking chunking = sharedMemoryChunking(options);
  if (leftRemote) {
    chunking.receiveBytes = networkChunkBytes(options);
    chunking.receiveDepth = depthFor(chunking.receiveBytes, options);
  }
  if (rightRemote) chunking.sendBytes = networkChunkBytes(options);
  return chunking;
}

}  // namespace ringtrain::collectives
