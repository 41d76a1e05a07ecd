#!/usr/bin/env bash
# A rank killed with SIGKILL in the middle of training (the OOM killer, a node lost): mpirun must
# end the whole job with a non-zero status within a bounded time, leaving no rank behind, and
# the same command with --resume auto must continue from the newest checkpoint and finish.
#   sigkill_resume_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
# shellcheck source=tests/resilience/job_control.sh
source "$(dirname "$0")/job_control.sh"
work="$(mktemp -d)"
trap 'cleanup_jobs; rm -rf "$work"' EXIT

# 300 steps of 10 ms or more each (--test-step-sleep-ms): the kill lands in the middle.
train=("${mpirun[@]}" -np 2 "$ringtrain" train --synthetic --synthetic-size 960 --hidden 64
  --batch-size 8 --lr 0.02 --steps 300 --log-every 50 --checkpoint-dir "$work/ck"
  --checkpoint-every 25 --test-step-sleep-ms 10)

start_job "$work/killed.log" "${train[@]}"
killed_job=$job_pid
if ! wait_for_file "$work/ck/latest" 30; then
  echo "FAIL no checkpoint within 30 s"
  cat "$work/killed.log"
  exit 1
fi
mapfile -t ranks < <(ranks_of "$killed_job")
check "mpirun started 2 ranks (${ranks[*]})" test "${#ranks[@]}" -eq 2
saved_before=$(step_of "$(cat "$work/ck/latest")")
kill -9 "${ranks[1]}"
echo "     killed rank process ${ranks[1]} with SIGKILL after the checkpoint of step $saved_before"

wait_bounded "$killed_job" 30
check "the job ended with a non-zero status ($job_status) within 30 s (${job_seconds} s)" \
  test "$job_status" -ne 0 -a "$job_status" -ne 124
check "no rank is left running 5 s later" gone_within 5 "${ranks[@]}"
check "the job had not finished" bash -c "! grep -q 'done: ' '$work/killed.log'"

newest=$(newest_checkpoint "$work/ck")
resumed_step=$(step_of "$newest")
check "a checkpoint of step $resumed_step >= $saved_before survived" \
  test "$resumed_step" -ge "$saved_before" -a "$resumed_step" -lt 300

start_job "$work/resumed.log" "${train[@]}" --resume auto
wait_bounded "$job_pid" 60
check "the rerun with --resume auto finished with status 0 ($job_status, ${job_seconds} s)" \
  test "$job_status" -eq 0
check "it resumed from $newest" grep -q "resuming from $newest (step $resumed_step," "$work/resumed.log"
check "it trained steps $((resumed_step + 1)) to 300" \
  grep -q "done: $((300 - resumed_step)) steps (steps $((resumed_step + 1)) to 300, resumed).*replicas identical" \
  "$work/resumed.log"
check "its final checkpoint is step 300" test -e "$work/ck/ckpt-00000300.h5"

if [ "$failures" -ne 0 ]; then
  echo "--- the killed run"; cat "$work/killed.log"
  echo "--- the resumed run"; cat "$work/resumed.log"
  exit 1
fi
