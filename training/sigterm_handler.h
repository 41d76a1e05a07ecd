// SIGTERM, what Kubernetes sends a pod before evicting it (and mpirun its ranks when it is
// itself told to stop): the process is not killed but told, through a flag the training loop
// reads once a step. The ranks then agree on a step to stop at (one small non-blocking
// all-reduce a step, since one rank may have been signalled and another not: stop_agreement.h),
// rank 0 writes a final checkpoint, and every rank exits (Trainer::run).
//
// The grace period bounds all of it: should the process still be running `graceSeconds` after
// the first SIGTERM (a rank stuck in a collective, a checkpoint folder that hangs), a timer
// thread calls `onGraceExpired`, which aborts the job. A SIGKILL follows a SIGTERM after
// Kubernetes' terminationGracePeriodSeconds (30 s by default) and after mpirun's
// odls_base_sigkill_timeout (1 s by default; raise it, see docs/data-and-checkpoints.md): the
// grace period should be shorter than both.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace ringtrain::training {

class SigtermHandler {
 public:
  // Installs the handler; one SigtermHandler at a time in a process.
  SigtermHandler(double graceSeconds, std::function<void()> onGraceExpired);
  // Restores the default action and stops the timer.
  ~SigtermHandler();
  SigtermHandler(const SigtermHandler&) = delete;
  SigtermHandler& operator=(const SigtermHandler&) = delete;

  // True from the first SIGTERM on; what the training loop reads.
  static const std::atomic<bool>& received();

 private:
  void timerLoop();

  double graceSeconds_;
  std::function<void()> onGraceExpired_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace ringtrain::training
