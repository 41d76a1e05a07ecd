#!/usr/bin/env bash
# One rank failing in the middle of a step ends the whole job at once, for every backend: with
# --test-fail-at POINT (test-only) the last rank throws an error in step 4 at the data read,
# during backward, while averaging, in the optimiser, at a log line or at a checkpoint. Every run
# of the matrix backend x point x ranks (2 and 3) must end non-zero within LIMIT seconds (the
# stall timeout is far longer), print the failing rank's message, and leave no process behind.
#   failure_matrix_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
# RINGTRAIN_FAILURE_MATRIX="backends;points;ranks" narrows the matrix (e.g. "shm;data;2").
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
work="$(mktemp -d)"
# shellcheck source=tests/support/tagged_ranks.sh
source "$(dirname "$0")/../support/tagged_ranks.sh"
export RINGTRAIN_TEST_TAG="failure-matrix-$$"
trap 'kill_own_ranks; rm -rf "$work"' EXIT

IFS=';' read -r backends points ranks <<<"${RINGTRAIN_FAILURE_MATRIX:-shm ring mpi hierarchical;data backward averaging optimizer logging checkpoint;2 3}"
limit=15
failures=0
runs=0
# shellcheck source=tests/support/parallel_cases.sh
source "$(dirname "$0")/../support/parallel_cases.sh"

# matrix_case NP BACKEND POINT: one run of the matrix; prints "ok" or "FAIL" with the reason. The
# runs go 3 at a time (tests/support/parallel_cases.sh): each mostly waits on mpirun.
matrix_case() {
  local np="$1" backend="$2" point="$3"
  local name="$backend, $point, $np ranks" ckpt="$work/ckpt-$np-$backend-$point"
  local start=$SECONDS output status elapsed problem=""
  output="$(timeout $((limit + 30)) "${mpirun[@]}" -np "$np" "$ringtrain" train --synthetic \
    --synthetic-size 2000 --hidden 64 --batch-size 16 --steps 8 --log-every 2 \
    --checkpoint-every 2 --checkpoint-dir "$ckpt" --stall-timeout 120 \
    --backend "$backend" --test-fail-at "$point" --test-fail-rank $((np - 1)) \
    --test-fail-step 4 2>&1)"
  status=$?
  elapsed=$((SECONDS - start))
  if [ "$status" -eq 0 ]; then
    problem="exit status 0"
  elif [ "$elapsed" -gt "$limit" ]; then
    problem="took ${elapsed} s (limit ${limit} s, status $status)"
  elif ! grep -q "test fault: $point failed on rank $((np - 1)) in step 4" <<<"$output"; then
    problem="the failing rank's message is missing"
  fi
  own_ranks_gone || problem="${problem:+$problem; }processes left behind"
  if [ -n "$problem" ]; then
    echo "FAIL $name: $problem"
    tail -n 5 <<<"$output" | sed 's/^/     | /'
    kill_own_ranks
  else
    echo "ok   $name: status $status in ${elapsed} s"
  fi
}

for np in $ranks; do
  for backend in $backends; do
    for point in $points; do
      runs=$((runs + 1))
      in_parallel matrix_case "$np" "$backend" "$point"
    done
  done
done
parallel_done
echo "$((runs - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
