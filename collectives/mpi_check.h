// Checked MPI calls and job-wide failure.
//
// Every MPI call in ringtrain goes through RINGTRAIN_MPI_CHECK. MpiEnvironment installs
// MPI_ERRORS_RETURN on MPI_COMM_WORLD (communicators duplicated from it inherit it), so a failing
// call returns its code here instead of killing the process silently; we print which rank, which
// call and MPI's own error text, then MPI_Abort the whole job. mpirun (and Kubernetes) then see a
// non-zero exit instead of the other ranks hanging in their next collective.
#pragma once

#include <string>
#include <string_view>

#include "base/exit_status.h"
#include "base/log.h"

namespace ringtrain::collectives {

// Logs the message as an error and aborts every rank of the job (MPI_Abort when MPI
// is initialised, std::exit otherwise).
[[noreturn]] void abortJob(std::string_view message, int exitCode = kExitFailed);

// Aborts the job with "[rank r/N host] MPI_Xxx failed: <MPI error string> (file:line)" unless
// rc == MPI_SUCCESS. `call` is the call's source text; only the function name is printed.
void checkMpi(int rc, const char* call, const char* file, int line);

}  // namespace ringtrain::collectives

#define RINGTRAIN_MPI_CHECK(call) \
  ::ringtrain::collectives::checkMpi((call), #call, __FILE__, __LINE__)
