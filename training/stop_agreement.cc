#include "training/stop_agreement.h"

#include <exception>

#include "collectives/mpi_check.h"

namespace ringtrain::training {

StopAgreement::StopAgreement(MPI_Comm comm) {
  RINGTRAIN_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
}

StopAgreement::~StopAgreement() {
  // Unwinding from an error that may be this rank's alone: waiting could hang; the job is about
  // to end anyway.
  if (std::uncaught_exceptions() > 0) return;
  finish();
  MPI_Comm_free(&comm_);
}

bool StopAgreement::exchange(bool stopHere) {
  const bool before = request_ != MPI_REQUEST_NULL;
  finish();
  const bool stop = before && any_ != 0;
  mine_ = stopHere ? 1 : 0;
  RINGTRAIN_MPI_CHECK(MPI_Iallreduce(&mine_, &any_, 1, MPI_INT, MPI_MAX, comm_, &request_));
  return stop;
}

void StopAgreement::finish() {
  if (request_ != MPI_REQUEST_NULL) RINGTRAIN_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
}

}  // namespace ringtrain::training
