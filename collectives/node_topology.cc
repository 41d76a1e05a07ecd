#include "collectives/node_topology.h"

#include "collectives/mpi_check.h"

namespace ringtrain::collectives {

namespace {
// The node communicator of NodeTopology's definition; the caller frees it.
MPI_Comm splitByNode(MPI_Comm comm, int ranksPerNode) {
  int rank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_Comm node = MPI_COMM_NULL;
  if (ranksPerNode > 0) {
    RINGTRAIN_MPI_CHECK(MPI_Comm_split(comm, rank / ranksPerNode, rank, &node));
  } else {
    RINGTRAIN_MPI_CHECK(
        MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  }
  return node;
}
}  // namespace

std::vector<int> nodeOfEachRank(MPI_Comm comm, int ranksPerNode) {
  int rank = 0;
  int size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm node = splitByNode(comm, ranksPerNode);
  int lowest = rank;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&rank, &lowest, 1, MPI_INT, MPI_MIN, node));
  RINGTRAIN_MPI_CHECK(MPI_Comm_free(&node));
  std::vector<int> nodes(static_cast<std::size_t>(size));
  RINGTRAIN_MPI_CHECK(MPI_Allgather(&lowest, 1, MPI_INT, nodes.data(), 1, MPI_INT, comm));
  return nodes;
}

NodeTopology::NodeTopology(MPI_Comm comm, int ranksPerNode) {
  int rank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  nodeComm_ = splitByNode(comm, ranksPerNode);
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(nodeComm_, &localRank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(nodeComm_, &localSize_));
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&localSize_, &largestNodeSize_, 1, MPI_INT, MPI_MAX, comm));
  const int isLeader = localRank_ == 0 ? 1 : 0;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&isLeader, &nodeCount_, 1, MPI_INT, MPI_SUM, comm));

  // One split per slice, on every rank (MPI_Comm_split is collective); key = rank keeps the
  // nodes in the same order in every cross-node communicator.
  for (int slice = 0; slice < largestNodeSize_; ++slice) {
    const bool carries = slice % localSize_ == localRank_;
    MPI_Comm cross = MPI_COMM_NULL;
    RINGTRAIN_MPI_CHECK(MPI_Comm_split(comm, carries ? 0 : MPI_UNDEFINED, rank, &cross));
    if (carries) carried_.emplace_back(slice, cross);
  }
}

NodeTopology::~NodeTopology() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& [slice, cross] : carried_)
    MPI_Comm_free(&cross);
  if (nodeComm_ != MPI_COMM_NULL) MPI_Comm_free(&nodeComm_);
}

}  // namespace ringtrain::collectives
