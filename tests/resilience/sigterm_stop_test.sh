#!/usr/bin/env bash
# SIGTERM, what Kubernetes sends before evicting a pod: the ranks agree on a step, rank 0 writes a
# final checkpoint there, every rank exits with --sigterm-exit-code (143), all within the grace
# period; --resume auto then ends with the parameters of a run that was never stopped, to the
# bit. Three ways in: SIGTERM to one rank (the others learn it from the per-step check); to
# mpirun (Open MPI 4.1 sends the ranks SIGCONT, then SIGTERM odls_base_sigkill_timeout seconds
# later, then SIGKILL as many seconds after that); and to ranks that cannot reach the check (one
# is stuck in a collective), which the grace timer must abort.
#   [RINGTRAIN_TEST_MODEL=gpt] sigterm_stop_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
# shellcheck source=tests/resilience/job_control.sh
source "$(dirname "$0")/job_control.sh"
work="$(mktemp -d)"
trap 'cleanup_jobs; rm -rf "$work"' EXIT
forward_sigterm="$(cd "$(dirname "$0")/../.." && pwd)/scripts/lib/forward_sigterm.sh"

options=(--synthetic --synthetic-size 960 --hidden 64 --batch-size 8 --lr 0.02 --steps 300
  --log-every 25 --checkpoint-every 1000)
# RINGTRAIN_TEST_MODEL=gpt: the same with a small GPT on synthetic token windows.
if [ "${RINGTRAIN_TEST_MODEL:-mlp}" = gpt ]; then
  options=(--model gpt --layers 1 --heads 2 --width 16 --context 16 --vocab 97 --synthetic
    --synthetic-size 960 --batch-size 4 --optimizer adamw --lr 0.002 --steps 300 --log-every 25
    --checkpoint-every 1000)
fi

start_job "$work/reference.log" "${mpirun[@]}" -np 2 "$ringtrain" train "${options[@]}" \
  --checkpoint-dir "$work/reference"
wait_bounded "$job_pid" 60
reference=$(fingerprint_in "$work/reference.log")
check "the uninterrupted run finished (status $job_status), fingerprint $reference" \
  test "$job_status" -eq 0 -a -n "$reference"

# stop_and_resume NAME TARGET SLEEP_MS [MPIRUN OPTIONS...]: a run slowed down to SLEEP_MS or more
# per step (so that the signal lands in the middle) gets SIGTERM to TARGET (one-rank or mpirun)
# once step 50 is logged; checks the stop, then resumes and compares the fingerprint.
stop_and_resume() {
  local name="$1" target="$2" slow=(--test-step-sleep-ms "$3")
  shift 3
  local dir="$work/$name" log="$work/$name.log" wrapper=()
  [ "$target" = wrapper ] && wrapper=("$forward_sigterm")
  start_job "$log" "${wrapper[@]}" "${mpirun[@]}" "$@" -np 2 "$ringtrain" train "${options[@]}" \
    "${slow[@]}" --checkpoint-dir "$dir"
  local job=$job_pid
  if ! wait_for_line "$log" "step 50/" 30; then
    echo "FAIL $name: step 50 never logged"
    failures=$((failures + 1))
    return
  fi
  local ranks
  if [ "$target" = wrapper ]; then
    # Through the wrapper the ranks are mpirun's children, mpirun is the wrapper's.
    mapfile -t ranks < <(for child in $(pgrep -P "$job"); do ranks_of "$child"; done)
  else
    mapfile -t ranks < <(ranks_of "$job")
  fi
  if [ "$target" = one-rank ]; then kill -TERM "${ranks[1]}"; else kill -TERM "$job"; fi
  wait_bounded "$job" 20
  local stopped
  stopped=$(sed -n 's/.*SIGTERM: stopping after step \([0-9]*\) of 300.*/\1/p' "$log")
  echo "     $name: SIGTERM to $target, stopped after step ${stopped:-?}, status $job_status in ${job_seconds} s"
  if [ "$target" = mpirun ]; then
    # mpirun reports its own status once signalled (1 with Open MPI 4.1), not the ranks'.
    check "$name: the job ended non-zero within the grace period" \
      test "$job_status" -ne 0 -a "$job_status" -ne 124
  else
    # One rank signalled: mpirun passes on the ranks' 143. Through forward_sigterm.sh: the
    # wrapper turns mpirun's 1 into the 143 rank 0 logged.
    check "$name: the job exited with status 143 within the grace period" test "$job_status" -eq 143
  fi
  check "$name: no rank is left running" gone_within 5 "${ranks[@]}"
  check "$name: all ranks stopped at one step, past 50" test "${stopped:-0}" -ge 50 -a "${stopped:-300}" -lt 300
  local final
  final="$dir/$(printf 'ckpt-%08d.h5' "${stopped:-0}")"
  check "$name: the final checkpoint is $final" grep -q "checkpoint $final written" "$log"
  check "$name: \`latest\` names it" test "$(cat "$dir/latest" 2>/dev/null)" = "${final##*/}"
  check "$name: rank 0 said how to continue" grep -q "stopped by SIGTERM after step ${stopped:-x}; rerun with --resume auto" "$log"

  start_job "$work/$name-resumed.log" "${mpirun[@]}" -np 2 "$ringtrain" train "${options[@]}" \
    --checkpoint-dir "$dir" --resume auto
  wait_bounded "$job_pid" 60
  check "$name: the resumed run finished (status $job_status)" test "$job_status" -eq 0
  check "$name: it resumed from the final checkpoint" grep -q "resuming from $final" "$work/$name-resumed.log"
  check "$name: its parameters are the uninterrupted run's, bit for bit" \
    test "$(fingerprint_in "$work/$name-resumed.log")" = "$reference"
}

stop_and_resume one-rank one-rank 10
if "${mpirun[0]}" --version 2>&1 | grep -q -E "Open MPI|OpenRTE|open-mpi.org"; then
  # The ranks see SIGTERM 2 s after mpirun does: 20 ms steps leave them some 200 steps to go.
  stop_and_resume via-mpirun mpirun 20 --mca odls_base_sigkill_timeout 2
  # What scripts/mpirun/train.sh, slurm_train.sbatch and the MPIJob launcher run mpirun through.
  stop_and_resume via-forward-sigterm wrapper 20 --mca odls_base_sigkill_timeout 2
else
  echo "skip SIGTERM to mpirun: the forwarding checked is Open MPI's"
fi

# Rank 1 stops taking part in the 40th gradient all-reduce (a test fault): rank 0 waits in it,
# neither reaches the per-step check, and the grace timer must end the job.
log="$work/stuck.log"
start_job "$log" "${mpirun[@]}" -np 2 "$ringtrain" train "${options[@]}" --checkpoint-dir "$work/stuck" \
  --stall-timeout 0 --test-stall-rank 1 --test-stall-collective 40 --sigterm-grace 2
job=$job_pid
if wait_for_line "$log" "test fault: not taking part" 30; then
  mapfile -t ranks < <(ranks_of "$job")
  kill -TERM "${ranks[@]}"
  wait_bounded "$job" 20
  echo "     stuck: SIGTERM to both ranks, status $job_status in ${job_seconds} s"
  check "stuck: the job ended non-zero soon after the 2 s grace period" \
    test "$job_status" -ne 0 -a "$job_status" -ne 124
  check "stuck: it said why" grep -q "error: SIGTERM: the job has not stopped 2 s after the signal" "$log"
  check "stuck: no rank is left running" gone_within 5 "${ranks[@]}"
else
  echo "FAIL stuck: the test fault never struck"
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  for f in "$work"/*.log; do
    echo "--- $f"
    cat "$f"
  done
  exit 1
fi
