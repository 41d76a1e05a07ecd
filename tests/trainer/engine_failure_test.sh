#!/usr/bin/env bash
# The gradient engine's ways of not hanging, under mpirun with 2 ranks, on the MNIST-like files of
# a small folder made here: a rank that skips a collective (test-only fault injection) is named by
# the stall watchdog, first in a warning at half the time-out (which --log-level error hides),
# and the job ends within the time-out plus a few seconds, for each backend;
# ranks started with different options are stopped at start-up with the differing rank and value;
# a NaN in the averaged gradients stops the job (--check-finite stop) or skips the step (skip),
# and without the option the NaN test loss stops it;
# --timeline writes a trace with the expected events on every rank (rank 0's checkpoints included). After every case no ringtrain
# process is left. The cases run 3 at a time (tests/support/parallel_cases.sh): most of their time
# is spent waiting, on the stall time-out or on mpirun.
#   engine_failure_test.sh RINGTRAIN CHECK_TIMELINE_PY MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
check_timeline="$2"
shift 2
mpirun=("$@")
work="$(mktemp -d)"
# shellcheck source=tests/support/tagged_ranks.sh
source "$(dirname "$0")/../support/tagged_ranks.sh"
export RINGTRAIN_TEST_TAG="engine-failures-$$"
trap 'kill_own_ranks; rm -rf "$work"' EXIT
failures=0
# shellcheck source=tests/support/parallel_cases.sh
source "$(dirname "$0")/../support/parallel_cases.sh"

fail() {
  echo "FAIL $1"
  failures=$((failures + 1))
}

# No process of this build's ringtrain may outlive its job (waits up to 5 s for exits).
no_leftovers() {
  own_ranks_gone && return 0
  fail "$1: processes left behind: $(own_ranks | xargs -r ps -o pid=,args= -p | tr '\n' ';')"
  kill_own_ranks
}

# run NAME LIMIT ARGS...: runs mpirun ARGS; sets $output, $status and $elapsed, and $after_stall:
# the seconds from the stall watchdog's "stall:" line to the job's end (empty without one). Each
# line is stamped with its time of arrival on the way.
run() {
  local name="$1" limit="$2"
  shift 2
  local start=$SECONDS stamped
  stamped="$({
    timeout $((limit + 60)) "${mpirun[@]}" "$@" 2>&1
    echo "exit status $?"
  } | while IFS= read -r line || [ -n "$line" ]; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done)"
  elapsed=$((SECONDS - start))
  status="$(tail -n 1 <<<"$stamped" | cut -d ' ' -f 4)"
  output="$(sed '$d; s/^[^ ]* //' <<<"$stamped")"
  after_stall="$(awk '/\] stall: / && !stall { stall = $1 } END { if (stall) printf "%.1f", $1 - stall }' \
    <<<"$stamped")"
  no_leftovers "$name"
}

# expect NAME WANT_STATUS LIMIT PATTERN ARGS...: status WANT_STATUS ("nonzero" for any failure),
# within LIMIT seconds, PATTERN (extended regex) on exactly one line.
expect() {
  local name="$1" want="$2" limit="$3" pattern="$4"
  shift 4
  run "$name" "$limit" "$@"
  local count status_ok=0
  count="$(grep -c -E -- "$pattern" <<<"$output")"
  if [ "$want" = nonzero ]; then
    [ "$status" -ne 0 ] && status_ok=1
  else
    [ "$status" -eq "$want" ] && status_ok=1
  fi
  if [ "$status_ok" -eq 1 ] && [ "$count" -eq 1 ] && [ "$elapsed" -le "$limit" ]; then
    echo "ok   $name (status $status, ${elapsed} s${after_stall:+, ended $after_stall s after the stall line}): $(grep -m1 -E -- "$pattern" <<<"$output")"
    return 0
  fi
  fail "$name: status $status (want $want), message seen $count times (want 1), ${elapsed} s (limit $limit)"
  echo "$output" | sed 's/^/     | /' | tail -40
  return 1
}

be32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
# idx_pair PREFIX COUNT: IDX images (random pixels) and labels (0-9) for COUNT 28x28 samples.
idx_pair() {
  printf "$(be32 2051)$(be32 "$2")$(be32 28)$(be32 28)" >"$1-images-idx3-ubyte"
  head -c $(($2 * 784)) /dev/urandom >>"$1-images-idx3-ubyte"
  printf "$(be32 2049)$(be32 "$2")" >"$1-labels-idx1-ubyte"
  head -c "$2" /dev/urandom | od -An -v -tu1 | tr -s ' ' '\n' | sed '/^$/d' |
    while read -r b; do printf "\\x$(printf %02x $((b % 10)))"; done >>"$1-labels-idx1-ubyte"
}
data="$work/mnist"
mkdir -p "$data"
idx_pair "$data/train" 512
idx_pair "$data/t10k" 64
train=("$ringtrain" train --data "$data" --log-every 0 --batch-size 16)

# expect_stall NAME PATTERN ARGS...: expect NAME nonzero with PATTERN, which says how long the
# watchdog waited (3 s, the time-out), and the job ends within 4 s of that line. The whole job's
# limit (30 s) is its start-up's: the cases run beside others, which slow that down.
expect_stall() {
  expect "$1" nonzero 30 "$2" "${@:3}" || return 1
  if [ -z "$after_stall" ] || awk -v t="$after_stall" 'BEGIN { exit !(t > 4) }'; then
    fail "$1: the job ended ${after_stall:-?} s after the watchdog's stall line (limit 4 s)"
    return 1
  fi
}

# A rank that never enters gradient all-reduce #10: the others warn at 1.5 s, naming it, then
# wait 3 s, name it again, and abort.
stall() {
  local backend="$1" warnings
  expect_stall "stall, $backend backend" \
    "stall: waited 3 s .*all-reduce #10 .*not reached by rank 1" \
    -np 2 "${train[@]}" --steps 40 --backend "$backend" --stall-timeout 3 \
    --test-stall-rank 1 --test-stall-collective 10 &&
    # The cause comes before Open MPI's shutdown messages.
    if ! grep -E "not reached by rank 1|MPI_ABORT" <<<"$output" | head -1 | grep -q "not reached"; then
      fail "stall, $backend backend: the cause is not the first thing printed"
    fi
  # At half the timeout the watchdog already names the rank, once, without ending the job.
  warnings="$(grep -cE "warning: slow: waited [12] s \(--stall-timeout 3\) in all-reduce #10 .*not reached by rank 1" <<<"$output")"
  if [ "$warnings" -ne 1 ]; then
    fail "stall, $backend backend: $warnings early warnings naming rank 1 (want 1)" "$output"
  fi
}
for backend in ring mpi; do in_parallel stall "$backend"; done

# The warning is a warning: --log-level error hides it, never the abort.
stall_log_level_error() {
  expect_stall "stall, --log-level error" \
    "stall: waited 3 s .*all-reduce #10 .*not reached by rank 1" \
    -np 2 "${train[@]}" --steps 40 --backend ring --stall-timeout 3 --log-level error \
    --test-stall-rank 1 --test-stall-collective 10 &&
    if grep -q "warning: slow" <<<"$output"; then
      fail "stall, --log-level error: the early warning is shown"
    fi
}
in_parallel stall_log_level_error

# With shared memory the fault stops rank 1 at step 10, before it announces any gradient.
stall_shm() {
  expect_stall "stall, shm backend" \
    "stall: waited 3 s .*in step 10 of the shared-memory gradient average for the gradients of .* from rank 1" \
    -np 2 "${train[@]}" --steps 40 --backend shm --stall-timeout 3 \
    --test-stall-rank 1 --test-stall-collective 10 &&
    if [ "$(grep -cE "warning: slow: waited [12] s .*in step 10 of the shared-memory gradient average for the gradients of .* from rank 1" <<<"$output")" -ne 1 ]; then
      fail "stall, shm backend: no single early warning naming rank 1" "$output"
    fi
}
in_parallel stall_shm

# MPMD: the ranks disagree on an option; nobody trains, nobody waits for ever.
in_parallel expect "hidden sizes differ" 2 30 "error: rank 1 has --hidden 512,256 but rank 0 has 512,512" \
  -np 1 "${train[@]}" --steps 5 --hidden 512,512 : -np 1 "${train[@]}" --steps 5 --hidden 512,256
in_parallel expect "learning rates differ" 2 30 "error: rank 1 has --lr 0.2 but rank 0 has 0.1" \
  -np 1 "${train[@]}" --steps 5 --lr 0.1 : -np 1 "${train[@]}" --steps 5 --lr 0.2
in_parallel expect "fusion thresholds differ (bucket plans)" 2 30 "error: rank 1 has --fusion-threshold" \
  -np 1 "${train[@]}" --steps 5 --fusion-threshold 1M : -np 1 "${train[@]}" --steps 5 \
  --fusion-threshold 64K

# A NaN in rank 0's input at step 7 (0-based) poisons the averaged gradients of step 8.
in_parallel expect "check-finite stop" 3 30 \
  "error: step 8: the averaged gradient of fc1.weight holds nan .*stopping \(--check-finite stop\)" \
  -np 2 "${train[@]}" --steps 20 --check-finite stop --test-nan-step 7
check_finite_skip() {
  expect "check-finite skip" 0 30 "skipping step 8: the averaged gradient of fc1.weight holds nan" \
    -np 2 "${train[@]}" --steps 20 --check-finite skip --test-nan-step 7 &&
    if ! grep -q "1 step(s) skipped for non-finite gradients" <<<"$output" ||
      ! grep -q "replicas identical" <<<"$output"; then
      fail "check-finite skip: no summary of the skipped step, or replicas differ"
    fi
}
in_parallel check_finite_skip
# Without the check the NaN reaches the parameters, and the test loss at the epoch's end (step
# 16: 512 samples, 2 x 16 a step) stops the job (divergence_test.sh has the rest of that).
in_parallel expect "check-finite off" 3 30 \
  "error: the test loss is nan at step 16: training diverged; try a lower --lr \(now 0\.1\)" \
  -np 2 "${train[@]}" --steps 20 --check-finite off --test-nan-step 7

# The timeline, for each backend, with several buckets (shm: whichever rank is idle averages), and
# the MLP's stage samples: its time is in the products and the loss.
timeline() {
  local backend="$1" trace="$work/timeline-$1.json" shared=()
  if [ "$backend" = shm ]; then shared=(--shared); fi
  expect "timeline, $backend backend" 0 60 "timeline written to $trace" \
    -np 2 "${train[@]}" --steps 30 --backend "$backend" --fusion-threshold 256K \
    --timeline "$trace" --checkpoint-dir "$work/checkpoints-$backend" --checkpoint-every 10 &&
    if ! python3 "$check_timeline" "$trace" --ranks 2 --backend "$backend" \
      --layers fc1,relu1,fc2,relu2,fc3 --require-rank0 checkpoint "${shared[@]}" \
      --stage products --stage "loss (softmax, cross-entropy)"; then
      fail "timeline, $backend backend: the trace lacks events"
    fi
}
for backend in ring mpi shm; do in_parallel timeline "$backend"; done
in_parallel expect "timeline file not writable" 2 30 "error: .*$work/no/such/dir/t.json" \
  -np 2 "${train[@]}" --steps 5 --timeline "$work/no/such/dir/t.json"
parallel_done

if [ "$failures" -ne 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all cases passed"
