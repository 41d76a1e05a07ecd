// StallWatchdog: no rank waits silently for ever in a collective.
//
// A collective finishes only when every rank has entered it. A rank that never arrives (stuck in
// its data loader, dead, or on another code path) would leave the others waiting for ever, and
// the user watching a job that prints nothing. One watchdog per process runs a thread that
// looks at the communicators registered with it (registered in the same order on every rank, so
// their positions identify them across ranks). When one of this rank's communicators has been
// inside collective #k for longer than the timeout, it asks every rank, over a communicator of
// its own, where it is; prints one line naming the ranks that have not reached #k (and those that
// did not answer); and aborts the job, so that mpirun (and Kubernetes) see a failure. At half the
// timeout it asks the same and prints it as a warning, once per collective, so that a slow rank
// is named before the job is ended. In the meantime it answers the other ranks' questions. It
// needs MPI_THREAD_MULTIPLE.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "collectives/communicator.h"

namespace ringtrain::collectives {

class StallWatchdog {
 public:
  // Collective over `world` (it duplicates it).
  StallWatchdog(MPI_Comm world, double timeoutSeconds);
  // Stops the thread; call before MPI_Finalize. Collective over `world`.
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // Watches `comm` until unwatch; `name` appears in the message ("gradients", "control").
  void watch(const Communicator& comm, std::string name);
  void unwatch(const Communicator& comm);
  double timeoutSeconds() const { return timeoutSeconds_; }

 private:
  struct Watched {
    const Communicator* comm;
    std::string name;
    std::uint64_t warnedSequence = 0;  // the collective already warned about
    // The collective the watchdog last saw this communicator inside, and since when (the
    // communicator reads no clock per call: the watchdog's polls time it).
    std::uint64_t seenSequence = 0;
    std::int64_t seenSinceNs = -1;  // -1: not inside one when last polled
  };
  // Seconds `w` has been inside its current collective as far as the polls tell (0 outside
  // one); updates what it saw. Called with mutex_ held.
  static double secondsInside(Watched& w, const CollectiveProgress& p, std::int64_t nowNs);
  void run();
  void answerQueries();
  // Asks every rank where it is and returns "not reached by rank 1 (last entered #9); no answer
  // from rank 2" for collective `stuck` of watched communicator `index`.
  std::string whoIsBehind(std::size_t index, const CollectiveProgress& stuck);
  // "waited 3 s (--stall-timeout 3) in all-reduce #10 of ... on the gradient communicator; ".
  std::string describeWait(std::size_t index, const CollectiveProgress& stuck,
                           double waitedSeconds) const;
  void warn(std::size_t index, const CollectiveProgress& stuck, double waitedSeconds);
  [[noreturn]] void reportAndAbort(std::size_t index, const CollectiveProgress& stuck,
                                   double waitedSeconds);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  double timeoutSeconds_;
  mutable std::mutex mutex_;
  std::vector<Watched> watched_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ringtrain::collectives
