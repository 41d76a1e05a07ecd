// NodeTopology: which ranks of a communicator share a node, and who carries which slice of a
// hierarchical all-reduce across nodes.
#pragma once

#include <utility>
#include <vector>

#include <mpi.h>

namespace ringtrain::collectives {

// Collective over `comm`: for every rank of `comm`, the lowest rank of `comm` on its node, so
// that two ranks share a node exactly when their entries are equal. The node is the same as
// NodeTopology's (MPI_COMM_TYPE_SHARED, or every ranksPerNode consecutive ranks when > 0).
std::vector<int> nodeOfEachRank(MPI_Comm comm, int ranksPerNode);

// The node communicator comes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), as in
// MpiEnvironment, so it is right under any launcher. ranksPerNode > 0 replaces that with
// "every ranksPerNode consecutive ranks form a node" (tests and benchmarks only: it lets one
// machine stand in for several nodes, e.g. 4 ranks as 2 nodes x 2, or 3 ranks as 2 + 1).
//
// A hierarchical all-reduce cuts the buffer into largestNodeSize() slices. On a node of that
// size, local rank r carries slice r across nodes. On a smaller node of k ranks, local rank r
// carries every slice s with s % k == r, so that every slice has exactly one carrier per node.
// crossComm(s) joins the carriers of slice s, one per node, in rank order; it exists on the
// carriers only.
class NodeTopology {
 public:
  NodeTopology(MPI_Comm comm, int ranksPerNode);
  ~NodeTopology();
  NodeTopology(const NodeTopology&) = delete;
  NodeTopology& operator=(const NodeTopology&) = delete;

  MPI_Comm nodeComm() const { return nodeComm_; }
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  int largestNodeSize() const { return largestNodeSize_; }
  int nodeCount() const { return nodeCount_; }
  // The slices this rank carries across nodes, ascending, each with its cross-node communicator.
  const std::vector<std::pair<int, MPI_Comm>>& carriedSlices() const { return carried_; }

 private:
  MPI_Comm nodeComm_ = MPI_COMM_NULL;
  int localRank_ = 0;
  int localSize_ = 1;
  int largestNodeSize_ = 1;
  int nodeCount_ = 1;
  std::vector<std::pair<int, MPI_Comm>> carried_;
};

}  // namespace ringtrain::collectives
