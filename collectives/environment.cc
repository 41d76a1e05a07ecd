#include "collectives/environment.h"

#include "collectives/mpi_check.h"

namespace ringtrain::collectives {

std::string_view threadLevelName(ThreadLevel level) {
  switch (level) {
    case ThreadLevel::kSingle:
      return "MPI_THREAD_SINGLE";
    case ThreadLevel::kFunneled:
      return "MPI_THREAD_FUNNELED";
    case ThreadLevel::kSerialized:
      return "MPI_THREAD_SERIALIZED";
    case ThreadLevel::kMultiple:
      return "MPI_THREAD_MULTIPLE";
  }
  return "unknown thread level";
}

MpiEnvironment::MpiEnvironment(int* argc, char*** argv, ThreadLevel requested)
    : requested_(requested) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) abortJob("MpiEnvironment created twice: MPI is already initialised");

  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Init_thread(argc, argv, static_cast<int>(requested), &provided);
  if (rc != MPI_SUCCESS) abortJob("MPI_Init_thread failed; is this program started by mpirun?");
  provided_ = static_cast<ThreadLevel>(provided);
  describeProcess();
}

MpiEnvironment::MpiEnvironment(Adopt) : requested_(ThreadLevel::kMultiple), ownsMpi_(false) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) abortJob("MpiEnvironment::Adopt: MPI is not initialised");
  int provided = MPI_THREAD_SINGLE;
  RINGTRAIN_MPI_CHECK(MPI_Query_thread(&provided));
  provided_ = static_cast<ThreadLevel>(provided);
  describeProcess();
}

void MpiEnvironment::describeProcess() {
  // From here on failing calls return their error code to RINGTRAIN_MPI_CHECK.
  RINGTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &worldRank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &worldSize_));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int nameLength = 0;
  RINGTRAIN_MPI_CHECK(MPI_Get_processor_name(name, &nameLength));
  hostName_.assign(name, static_cast<std::size_t>(nameLength));
  setProcessLabel(worldRank_, worldSize_, hostName_);

  RINGTRAIN_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank_,
                                          MPI_INFO_NULL, &localComm_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(localComm_, &localRank_));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(localComm_, &localSize_));

  // Each node's first rank counts once; an exclusive prefix sum over the leaders numbers the nodes
  // in order of their lowest rank, and the leader shares its number with its node.
  int isLeader = localRank_ == 0 ? 1 : 0;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&isLeader, &nodeCount_, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  int leadersBefore = 0;
  RINGTRAIN_MPI_CHECK(MPI_Exscan(&isLeader, &leadersBefore, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (worldRank_ == 0) leadersBefore = 0;  // MPI_Exscan leaves rank 0's result undefined.
  nodeIndex_ = leadersBefore;
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&nodeIndex_, 1, MPI_INT, 0, localComm_));
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (localComm_ != MPI_COMM_NULL) MPI_Comm_free(&localComm_);
  if (ownsMpi_) MPI_Finalize();
}

void MpiEnvironment::requireThreadLevel(ThreadLevel needed, std::string_view feature) const {
  if (static_cast<int>(provided_) >= static_cast<int>(needed)) return;
  abortJob(std::string(feature) + " needs " + std::string(threadLevelName(needed)) +
           " but this MPI provides only " + std::string(threadLevelName(provided_)) +
           " (asked for " + std::string(threadLevelName(requested_)) +
           "); use an MPI built with thread support or turn the feature off");
}

}  // namespace ringtrain::collectives
