#!/usr/bin/env bash
# A forged checkpoint that crashes libhdf5 (tests/storage/fuzz/libhdf5-findings/checkpoint, its
# header made valid by seal_checkpoint.py) does not take a 2-rank job down: --resume auto skips it,
# naming it and the crash, and resumes from the older good checkpoint; --resume FILE refuses it
# with exit status 2 and one line. Exit 77 (skipped, saying why) when none of the findings kills
# the check by a signal: a libhdf5 that survives them, or a sanitized build, whose sanitizer ends
# the process with an exit status of its own first.
#   forged_checkpoint_test.sh RINGTRAIN FINDINGS_DIR MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
findings="$2"
shift 2
mpirun=("$@")
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

# The first finding that, sealed, kills `ringtrain check checkpoint` by a signal.
forged=""
for finding in "$findings"/libhdf5-crash-*; do
  step="$(python3 "$here/seal_checkpoint.py" "$finding" "$work/candidate.h5")" || continue
  # (in a subshell whose stderr is discarded: bash would report the crash on the terminal)
  status="$( (timeout 60 "$ringtrain" check checkpoint "$work/candidate.h5" >/dev/null 2>&1; echo $?) 2>/dev/null)"
  if [ "$status" -gt 128 ] && [ "$status" -ne 137 ] && [ "$step" -gt 20 ]; then
    forged="$finding"
    break
  fi
done
if [ -z "$forged" ]; then
  echo "SKIPPED: no sealed finding in $findings kills 'ringtrain check' by a signal (this libhdf5 survives them, or a sanitizer ends the process first with its own exit status)"
  exit 77
fi
echo "forged: $(basename "$forged") (step $step) kills 'ringtrain check checkpoint' with status $status"

dir="$work/ckpt"
common=(train --synthetic --synthetic-size 960 --log-every 0 --checkpoint-dir "$dir")
if ! timeout 120 "${mpirun[@]}" -np 2 "$ringtrain" "${common[@]}" --steps 20 >"$work/first.log" 2>&1; then
  echo "FAIL the first run (writing ckpt-00000020.h5)"; sed 's/^/     | /' "$work/first.log" | tail -20
  exit 1
fi
newest="$dir/$(printf 'ckpt-%08d.h5' "$step")"
mv "$work/candidate.h5" "$newest"

timeout 120 "${mpirun[@]}" -np 2 "$ringtrain" "${common[@]}" --steps 30 --resume auto >"$work/auto.log" 2>&1
status=$?
if [ "$status" -eq 0 ] && grep -q "resuming from $dir/ckpt-00000020.h5" "$work/auto.log" &&
  grep -q "skipped $newest: reading it crashed a separate check process (signal" "$work/auto.log"; then
  echo "ok   --resume auto: $(grep -o 'skipped .*signal [0-9]*, [A-Za-z ]*' "$work/auto.log" | head -1)"
else
  echo "FAIL --resume auto with a forged newest checkpoint (status $status, want 0, resumed from step 20)"
  sed 's/^/     | /' "$work/auto.log" | tail -20
  failures=$((failures + 1))
fi

timeout 120 "${mpirun[@]}" -np 2 "$ringtrain" "${common[@]}" --steps 60 --resume "$newest" >"$work/file.log" 2>&1
status=$?
count="$(grep -c "error: $newest: reading it crashed a separate check process" "$work/file.log")"
if [ "$status" -eq 2 ] && [ "$count" -ge 1 ] && ! grep -q "exited on signal" "$work/file.log"; then
  echo "ok   --resume FILE: exit 2: $(grep -m1 -o "error: .*" "$work/file.log")"
else
  echo "FAIL --resume FILE with the forged checkpoint (status $status, want 2; message $count time(s))"
  sed 's/^/     | /' "$work/file.log" | tail -20
  failures=$((failures + 1))
fi
[ "$failures" -eq 0 ] || exit 1
echo "a checkpoint that crashes libhdf5 is refused, and the job goes on from the one before"
