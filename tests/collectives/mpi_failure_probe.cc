// A program that fails on purpose, for the tests of job-wide failure (tests/CMakeLists.txt):
//   mpi_failure_probe bad-call      rank 1 sends to a rank that does not exist
//   mpi_failure_probe thread-level  asks for MPI_THREAD_FUNNELED, then requires MULTIPLE
// The other ranks wait in a barrier that rank 1 never reaches: only the abort ends them.
#include <cstring>
#include <iostream>

#include <mpi.h>

#include "collectives/environment.h"
#include "collectives/mpi_check.h"

using ringtrain::collectives::MpiEnvironment;
using ringtrain::collectives::ThreadLevel;

int main(int argc, char** argv) {
  const bool threadLevel = argc > 1 && std::strcmp(argv[1], "thread-level") == 0;
  MpiEnvironment env(&argc, &argv, threadLevel ? ThreadLevel::kFunneled : ThreadLevel::kMultiple);
  if (threadLevel) {
    env.requireThreadLevel(ThreadLevel::kMultiple, "the test feature");
  } else if (env.worldRank() == 1) {
    int value = 0;
    RINGTRAIN_MPI_CHECK(MPI_Send(&value, 1, MPI_INT, env.worldSize() + 5, 0, MPI_COMM_WORLD));
  }
  RINGTRAIN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  std::cout << "not aborted\n";
  return 0;
}
