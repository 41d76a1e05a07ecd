#include "collectives/mpi_check.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <mpi.h>

namespace ringtrain::collectives {

void abortJob(std::string_view message, int exitCode) {
  logLine(LogLevel::kError, message);
  // mpirun forwards the ranks' output asynchronously but prints its own abort banner at once: a
  // moment's grace lets the cause arrive first instead of under the other ranks' shutdown noise.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exitCode);
  std::_Exit(exitCode);
}

void checkMpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) [[likely]]
    return;
  std::string_view text(call);
  std::string_view name = text.substr(0, text.find('('));
  char error[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, error, &length) != MPI_SUCCESS) {
    std::snprintf(error, sizeof(error), "MPI error code %d", rc);
  }
  abortJob(std::string(name) + " failed: " + error + " (" + file + ":" + std::to_string(line) +
           ")");
}

}  // namespace ringtrain::collectives
