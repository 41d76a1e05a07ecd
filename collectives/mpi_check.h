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

namespace ringtrain::collectives {

// "[rank r/N host]": the prefix of every line this process prints. MpiEnvironment sets it; before
// that it reads "[rank ?/? host]".
const std::string& processLabel();
void setProcessLabel(int rank, int size, std::string_view host);

enum class OutputStream { kStandardOutput, kStandardError };
// Writes "<label> <message>\n" in one write(2), so lines of different ranks never interleave
// mid-line; errors (the default) to standard error, progress to standard output.
void printLine(std::string_view message, OutputStream stream = OutputStream::kStandardError);

// Prints the message with the process label and aborts every rank of the job (MPI_Abort when MPI
// is initialised, std::exit otherwise).
[[noreturn]] void abortJob(std::string_view message, int exitCode = 1);

// Aborts the job with "[rank r/N host] MPI_Xxx failed: <MPI error string> (file:line)" unless
// rc == MPI_SUCCESS. `call` is the call's source text; only the function name is printed.
void checkMpi(int rc, const char* call, const char* file, int line);

}  // namespace ringtrain::collectives

#define RINGTRAIN_MPI_CHECK(call) \
  ::ringtrain::collectives::checkMpi((call), #call, __FILE__, __LINE__)
