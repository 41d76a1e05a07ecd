#!/usr/bin/env bash
# One run per checkpoint folder. Two jobs started at once with the same --checkpoint-dir: one is
# refused (status 2, one line naming the holder), the other finishes with its checkpoints intact.
# --resume auto while another run holds the folder is refused the same way. A holder killed with
# SIGKILL leaves its lock file behind, and the next run proceeds.
#   checkpoint_folder_lock_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
# shellcheck source=tests/resilience/job_control.sh
source "$(dirname "$0")/job_control.sh"
work="$(mktemp -d)"
trap 'cleanup_jobs; rm -rf "$work"' EXIT

# 300 steps of 20 ms or more each: a run holds its folder for 6 s at least, long enough for a
# job started beside it to reach the lock.
train=("${mpirun[@]}" -np 2 "$ringtrain" train --synthetic --synthetic-size 960 --hidden 64
  --batch-size 8 --lr 0.02 --steps 300 --log-every 100 --keep 0)
in_use() {  # in_use LOG DIR: the refusal, as one line
  grep -qE "error: .*--checkpoint-dir $2 is in use by another run \(host [^,]+, pid [0-9]+, started [0-9T:Z-]+\): wait for it, or use another folder" "$1"
}
refusals_in() { grep -c "is in use by another run" "$1"; }

# ---- Two jobs at once ----------------------------------------------------------------------
shared="$work/shared"
start_job "$work/a.log" "${train[@]}" --checkpoint-dir "$shared" --checkpoint-every 100 \
  --test-step-sleep-ms 20 --seed 101
job_a=$job_pid
start_job "$work/b.log" "${train[@]}" --checkpoint-dir "$shared" --checkpoint-every 100 \
  --test-step-sleep-ms 20 --seed 202
job_b=$job_pid
wait_bounded "$job_a" 60
status_a=$job_status
wait_bounded "$job_b" 60
status_b=$job_status
winner=""
if [ "$status_a" -eq 0 ] && [ "$status_b" -eq 2 ]; then
  winner=a loser=b seed=101
elif [ "$status_a" -eq 2 ] && [ "$status_b" -eq 0 ]; then
  winner=b loser=a seed=202
fi
check "of two jobs started at once, one finished (0) and one was refused (2): $status_a, $status_b" \
  test -n "$winner"
if [ -n "$winner" ]; then
  check "the refused job said why, once" in_use "$work/$loser.log" "$shared"
  check "... in one line, not once per rank" test "$(refusals_in "$work/$loser.log")" -eq 1
  holder_pid=$(sed -n 's/^pid = //p' "$shared/.ringtrain.lock")
  check "... naming the holder's pid ($holder_pid)" grep -q "pid $holder_pid, started" "$work/$loser.log"
  check "the refused job trained nothing" bash -c "! grep -q 'step 100/\|checkpoint .* written' '$work/$loser.log'"
  check "the other trained all 300 steps" grep -q "done: 300 steps" "$work/$winner.log"
  check "the folder holds its three checkpoints, and only those" \
    test "$(find "$shared" -maxdepth 1 -name 'ckpt-*.h5' | sort | xargs -n1 basename | tr '\n' ' ')" \
    = "ckpt-00000100.h5 ckpt-00000200.h5 ckpt-00000300.h5 "
  check "\`latest\` names its last" test "$(cat "$shared/latest")" = "ckpt-00000300.h5"
  for step in 100 200 300; do
    file="$shared/ckpt-00000$step.h5"
    check "ckpt-00000$step.h5 is good" "$ringtrain" check checkpoint "$file"
    check "... and was written by the run with --seed $seed" grep -aq "^seed = $seed\$" "$file"
  done
fi

# ---- --resume auto beside a running job, then the holder killed ----------------------------
folder="$work/ck"
start_job "$work/holder.log" "${train[@]}" --checkpoint-dir "$folder" --checkpoint-every 25 \
  --test-step-sleep-ms 50
holder=$job_pid
if ! wait_for_file "$folder/latest" 30; then
  echo "FAIL the holder wrote no checkpoint within 30 s"
  cat "$work/holder.log"
  exit 1
fi
start_job "$work/auto.log" "${train[@]}" --checkpoint-dir "$folder" --resume auto
wait_bounded "$job_pid" 30
check "--resume auto while another run holds the folder: status 2 ($job_status, ${job_seconds} s)" \
  test "$job_status" -eq 2
check "... with the refusal, once" in_use "$work/auto.log" "$folder"
check "... and no resume" bash -c "! grep -q 'resuming from' '$work/auto.log'"
check "the holder was still running" kill -0 "$holder"

mapfile -t ranks < <(ranks_of "$holder")
kill_job "$holder"
echo "     killed the holder (mpirun $holder, ranks ${ranks[*]}) with SIGKILL"
check "its ranks are gone" gone_within 5 "${ranks[@]}"
check "its lock file stays behind, naming one of its ranks" \
  grep -qE "^pid = (${ranks[0]}|${ranks[1]:-none})\$" "$folder/.ringtrain.lock"
newest=$(newest_checkpoint "$folder")
resumed_step=$(step_of "$newest")
start_job "$work/next.log" "${train[@]}" --checkpoint-dir "$folder" --resume auto
wait_bounded "$job_pid" 60
check "the next run proceeded and finished with status 0 ($job_status, ${job_seconds} s)" \
  test "$job_status" -eq 0
check "... resuming from $newest" grep -q "resuming from $newest (step $resumed_step," "$work/next.log"
check "... and its lock file names the new holder" \
  bash -c "! grep -qE '^pid = (${ranks[0]}|${ranks[1]:-none})\$' '$folder/.ringtrain.lock'"

if [ "$failures" -ne 0 ]; then
  for log in a b holder auto next; do
    echo "--- $log"
    cat "$work/$log.log" 2>/dev/null
  done
  exit 1
fi
