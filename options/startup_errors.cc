#include "options/startup_errors.h"

#include <cstdlib>

#include <mpi.h>

#include "collectives/mpi_check.h"

namespace ringtrain::options {

void exitEverywhereOnError(const std::optional<std::string>& error, int exitCode) {
  int rank = 0;
  int size = 1;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  RINGTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const int mine = error ? rank : size;
  int firstFailing = size;
  RINGTRAIN_MPI_CHECK(MPI_Allreduce(&mine, &firstFailing, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (firstFailing == size) return;
  if (rank == firstFailing) logLine(LogLevel::kError, "error: " + *error);
  MPI_Finalize();
  std::exit(exitCode);
}

void warnOnRankZero(const std::vector<std::string>& warnings, int rank) {
  if (rank != 0) return;
  for (const std::string& warning : warnings)
    logLine(LogLevel::kWarn, "warning: " + warning);
}

}  // namespace ringtrain::options
