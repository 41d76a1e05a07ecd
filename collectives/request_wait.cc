#include "collectives/request_wait.h"

#include <sched.h>

#include "collectives/mpi_check.h"

namespace ringtrain::collectives {
namespace {
// Tests in a row before yielding: a message that is about to arrive costs no system call.
constexpr int kTestsBeforeYield = 64;
}  // namespace

void waitFor(MPI_Request* request, MPI_Status* status, WaitMode mode) {
  if (mode == WaitMode::kSpin) {
    RINGTRAIN_MPI_CHECK(MPI_Wait(request, status));
    return;
  }
  for (int tests = 1;; ++tests) {
    int done = 0;
    RINGTRAIN_MPI_CHECK(MPI_Test(request, &done, status));
    if (done) return;
    if (tests % kTestsBeforeYield == 0) sched_yield();
  }
}

void waitForAll(int count, MPI_Request* requests, WaitMode mode) {
  if (mode == WaitMode::kSpin) {
    RINGTRAIN_MPI_CHECK(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
    return;
  }
  for (int tests = 1;; ++tests) {
    int done = 0;
    RINGTRAIN_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (tests % kTestsBeforeYield == 0) sched_yield();
  }
}

}  // namespace ringtrain::collectives
