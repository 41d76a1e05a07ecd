#!/usr/bin/env bash
# --log-file and --log-level under mpirun with 3 ranks, rank 1 made slow for 3 s in gradient
# all-reduce #10 (test-only fault injection) so that ranks 0 and 2 warn (--stall-timeout 4) and
# the job still ends well:
#   - every rank's file exists, each line time-stamped (ISO-8601 UTC) and prefixed with its rank;
#   - rank 2's warning is in rank 2's file and not on the terminal, which keeps rank 0's lines;
#   - rank 0's progress line says step k/n, epoch k/n, the rate, the time elapsed and left;
#   - a second run appends to the files: the first run's lines stay;
#   - --log-level error hides the progress and the warnings, warn shows the warnings only, debug
#     adds each rank's own pace.
#   log_file_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

check() {
  local name="$1"
  shift
  if "$@"; then
    echo "ok   $name"
  else
    echo "FAIL $name"
    failures=$((failures + 1))
  fi
}

# job ARGS...: 3 ranks, rank 1 slow once; sets $status, $out (stdout) and $err (stderr).
job() {
  timeout 120 "${mpirun[@]}" -np 3 "$ringtrain" train --synthetic --synthetic-size 600 \
    --batch-size 16 --steps 20 --log-every 5 --backend ring --stall-timeout 4 \
    --test-stall-rank 1 --test-stall-collective 10 --test-stall-seconds 3 "$@" \
    >"$work/out" 2>"$work/err"
  status=$?
  out="$(cat "$work/out")"
  err="$(cat "$work/err")"
}

stamp='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
slow='warning: slow: .*all-reduce #10 .*not reached by rank 1'
progress='step 20/20 \(epoch 2/2\)  loss [0-9.]+  lr [0-9.]+  [0-9]+ samples/s \([0-9]+/rank\), [0-9]+:[0-9]{2} elapsed, ~[0-9]+:[0-9]{2} left'

# every_line_stamped FILE RANK: FILE has lines, each "<time stamp> [rank RANK/3 host] ...".
every_line_stamped() {
  [ -s "$1" ] && ! grep -qvE "^$stamp \[rank $2/3 [^]]+\] " "$1"
}

job --log-file "$work/logs/train-%r.log"
check "with --log-file: the job ends well (status $status)" test "$status" -eq 0
for r in 0 1 2; do
  check "rank $r: its file holds time-stamped lines with its prefix" \
    every_line_stamped "$work/logs/train-$r.log" "$r"
done
check "rank 2's warning naming rank 1 is in rank 2's file" grep -qE "$slow" "$work/logs/train-2.log"
check "rank 1's own warning is in rank 1's file" \
  grep -q "test fault: not taking part in collective #10 for 3 s" "$work/logs/train-1.log"
check "the terminal has no line of rank 1 or 2" \
  bash -c '! grep -qE "\[rank [12]/3 " <<<"$1"' _ "$out$err"
check "the terminal keeps rank 0's progress, without time stamps" \
  grep -qE "^\[rank 0/3 [^]]+\] $progress" <<<"$out"
check "rank 0's file has the progress line: step, epoch, rate, elapsed, left" \
  grep -qE "^$stamp \[rank 0/3 [^]]+\] $progress" "$work/logs/train-0.log"
check "rank 0's warning is on the terminal too" grep -qE "^\[rank 0/3 [^]]+\] $slow" <<<"$err"

first="$(head -1 "$work/logs/train-1.log")"
lines="$(wc -l <"$work/logs/train-1.log")"
job --log-file "$work/logs/train-%r.log"
check "a second run appends: the first run's lines stay (status $status)" \
  test "$status" -eq 0 -a "$(head -1 "$work/logs/train-1.log")" = "$first" \
  -a "$(wc -l <"$work/logs/train-1.log")" -gt "$lines"

job --log-level error
check "--log-level error: the job ends well (status $status)" test "$status" -eq 0
check "--log-level error: no progress, no report, no warning" \
  test -z "$(grep -E "step [0-9]+/20|done:|warning:" <<<"$out$err")"

job --log-level warn
check "--log-level warn: ranks 0 and 2 warn, naming rank 1" \
  test "$(grep -E "$slow" <<<"$err" | grep -oE '\[rank [02]/3' | sort -u | wc -l)" -eq 2
check "--log-level warn: no progress" test -z "$(grep -E "step [0-9]+/20|done:" <<<"$out")"

job --log-level debug
check "--log-level debug: the progress as at info" grep -qE "\[rank 0/3 [^]]+\] $progress" <<<"$out"
check "--log-level debug: every rank tells its own pace" \
  test "$(grep -E "this rank, steps 16 to 20: [0-9.]+ ms per step" <<<"$out" |
    grep -oE '\[rank [0-9]/3' | sort -u | wc -l)" -eq 3
job
check "--log-level info (the default): no rank's own pace" \
  test -z "$(grep "this rank, steps" <<<"$out")"

if [ "$failures" -gt 0 ]; then
  echo "--- last job's output:"
  echo "$out$err" | sed 's/^/     | /' | tail -30
  echo "$failures check(s) failed"
  exit 1
fi
echo "all log checks passed"
