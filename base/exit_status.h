// The exit statuses of ringtrain's programs, one name each. docs/options.md ("Exit statuses")
// tables them with what the launch scripts return; tests/trainer/exit_status_test.sh checks that
// table against this file.
#pragma once

namespace ringtrain {

inline constexpr int kExitOk = 0;  // done (a run stopped by SIGTERM with --sigterm-exit-code 0 too)
// An error in the middle of a run, the job aborted on every rank (MPI_Abort); replicas that
// differ at the end of training; wrong values found by allreduce_perf.
inline constexpr int kExitFailed = 1;
// Bad input: an option, file, data set or checkpoint, one line naming it, on every rank.
inline constexpr int kExitBadInput = 2;
// Training stopped on every rank at the same step: diverged (non-finite loss or parameters), or
// --check-finite stop found a NaN or infinity in the averaged gradients.
inline constexpr int kExitTrainingStopped = 3;
// 128 + SIGKILL: killed (the kernel's OOM killer, a scheduler after its grace period, kill -9).
// No program here exits with it on purpose; the checkpoint writer's crash tests stand in for it.
inline constexpr int kExitKilled = 137;
// 128 + SIGTERM: stopped by SIGTERM at a step all ranks agreed on, after a final checkpoint
// (--sigterm-exit-code's default): rerun with --resume auto.
inline constexpr int kExitSigterm = 143;

}  // namespace ringtrain
