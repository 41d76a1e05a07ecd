// StopAgreement: all ranks learn, without waiting for one another, whether any of them has been
// asked to stop (SIGTERM), and stop after the same step.
//
// After step s every rank starts a non-blocking MAX all-reduce of its flag (MPI_Iallreduce, on a
// communicator of its own); after step s+1 it completes it and starts the next. So every rank
// reads the same verdict -- the flags as they were after step s -- and the ranks stop together
// after step s+1, one step later than a blocking check would. The point of the delay: a
// blocking all-reduce after each step made every rank wait for the slowest one's optimiser
// there, and on a busy core its spinning took the time from the rank it waited for; the
// non-blocking one has had a whole step to finish and costs almost nothing.
#pragma once

#include <mpi.h>

namespace ringtrain::training {

class StopAgreement {
 public:
  // Collective over `comm` (duplicates it).
  explicit StopAgreement(MPI_Comm comm);
  // Completes an all-reduce still under way: collective, as every rank has started as many.
  ~StopAgreement();
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  // Collective, once after every step: hands in this rank's flag and returns whether any rank's
  // flag was set at the previous call (false at the first).
  bool exchange(bool stopHere);
  // Collective: completes the all-reduce under way, if any.
  void finish();

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int mine_ = 0;
  int any_ = 0;
};

}  // namespace ringtrain::training
