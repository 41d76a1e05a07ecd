// MpiEnvironment: MPI's lifetime and where this process stands in the job.
#pragma once

#include <string>
#include <string_view>

#include <mpi.h>

namespace ringtrain::collectives {

enum class ThreadLevel {
  kSingle = MPI_THREAD_SINGLE,
  kFunneled = MPI_THREAD_FUNNELED,
  kSerialized = MPI_THREAD_SERIALIZED,
  kMultiple = MPI_THREAD_MULTIPLE,
};
std::string_view threadLevelName(ThreadLevel level);

// Initialises MPI on construction and finalises it on destruction; one per process.
//
// It asks for MPI_THREAD_MULTIPLE by default because the gradient engine calls MPI from a
// communication thread while the main thread may call it too; what MPI actually provides is
// recorded, and requireThreadLevel() stops the job with a clear message where a feature needs
// more than that. Local rank and size come from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), so
// they are right under any launcher (mpirun, srun, the MPI operator), not read from a launcher's
// environment variables.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv, ThreadLevel requested = ThreadLevel::kMultiple);
  // Adopts an MPI that the caller initialised (and will finalise): the same facts, read from it;
  // the destructor frees only what this object made. Aborts when MPI is not initialised.
  struct Adopt {};
  explicit MpiEnvironment(Adopt);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int worldRank() const { return worldRank_; }
  int worldSize() const { return worldSize_; }
  // Rank and size among the processes sharing this node's memory.
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  int nodeCount() const { return nodeCount_; }
  // Position of this node among the nodes, 0 .. nodeCount()-1 (ordered by their lowest rank).
  int nodeIndex() const { return nodeIndex_; }
  const std::string& hostName() const { return hostName_; }

  ThreadLevel requestedThreadLevel() const { return requested_; }
  ThreadLevel providedThreadLevel() const { return provided_; }
  // Aborts the job naming `feature` when MPI provides less than `needed`.
  void requireThreadLevel(ThreadLevel needed, std::string_view feature) const;

  MPI_Comm world() const { return MPI_COMM_WORLD; }
  // The ranks of this node (MPI_COMM_TYPE_SHARED).
  MPI_Comm localComm() const { return localComm_; }

 private:
  // Everything after MPI_Init_thread: error handler, ranks, host, node facts.
  void describeProcess();

  ThreadLevel requested_;
  bool ownsMpi_ = true;
  ThreadLevel provided_ = ThreadLevel::kSingle;
  int worldRank_ = 0;
  int worldSize_ = 1;
  int localRank_ = 0;
  int localSize_ = 1;
  int nodeCount_ = 1;
  int nodeIndex_ = 0;
  std::string hostName_;
  MPI_Comm localComm_ = MPI_COMM_NULL;
};

}  // namespace ringtrain::collectives
