#!/usr/bin/env bash
# A checkpoint folder holding a foreign file named like a checkpoint of a higher step
# (ckpt-999999.h5, copied from another run, whose step inside is 20) beside this run's
# ckpt-00000040.h5, which `latest` names: --resume auto passes the foreign file over, naming it,
# resumes from step 40 and leaves the file alone; without --resume the folder is refused with a
# message naming the file as it is on disk.
#   foreign_checkpoint_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
run() {  # run LOG ARGS...: one rank of the small MLP on synthetic data
  local log="$1"
  shift
  timeout 120 "${mpirun[@]}" -np 1 "$ringtrain" train --synthetic --synthetic-size 480 \
    --log-every 0 --eval-every 0 "$@" >"$log" 2>&1
}
fail() {
  echo "FAIL $1"
  sed 's/^/     | /' "$2" | tail -15
  failures=$((failures + 1))
}

run "$work/other.log" --steps 20 --checkpoint-dir "$work/other" || fail "the other run" "$work/other.log"
run "$work/first.log" --steps 40 --checkpoint-dir "$work/ckpt" || fail "this run" "$work/first.log"
cp "$work/other/ckpt-00000020.h5" "$work/ckpt/ckpt-999999.h5"

run "$work/auto.log" --steps 60 --checkpoint-dir "$work/ckpt" --resume auto
status=$?
if [ "$status" -eq 0 ] && grep -q "resuming from $work/ckpt/ckpt-00000040.h5 (step 40" "$work/auto.log" &&
  grep -q "skipped $work/ckpt/ckpt-999999.h5: its step inside is 20, not the 999999 of its name" "$work/auto.log" &&
  [ -f "$work/ckpt/ckpt-999999.h5" ] && [ -f "$work/ckpt/ckpt-00000060.h5" ]; then
  echo "ok   --resume auto: from step 40, $(grep -o 'skipped [^;]*' "$work/auto.log" | head -1)"
else
  fail "--resume auto with a foreign ckpt-999999.h5 (status $status, want 0, from step 40)" "$work/auto.log"
fi

run "$work/fresh.log" --steps 10 --checkpoint-dir "$work/ckpt"
status=$?
if [ "$status" -eq 2 ] && grep -q "up to step 999999 (ckpt-999999.h5)" "$work/fresh.log" &&
  ! grep -q "ckpt-00999999.h5" "$work/fresh.log"; then
  echo "ok   without --resume: exit 2: $(grep -m1 -o 'error: .*' "$work/fresh.log")"
else
  fail "a fresh run in the folder (status $status, want 2, naming ckpt-999999.h5)" "$work/fresh.log"
fi
[ "$failures" -eq 0 ] || exit 1
echo "a foreign checkpoint file is never the start, and refusals name files as they are"
