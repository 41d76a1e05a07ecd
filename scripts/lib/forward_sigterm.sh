#!/usr/bin/env bash
# Runs COMMAND (mpirun ... ringtrain train ...) with SIGTERM forwarded to it, and exits
# with the status ringtrain chose for a SIGTERM stop (--sigterm-exit-code, 143 by default).
#
#   forward_sigterm.sh mpirun -np 8 ringtrain train ...
#
# Why: Open MPI 4.1's mpirun, sent SIGTERM, forwards it to the ranks, which stop at one step and
# write a final checkpoint, but mpirun then exits 1, its own status for "signalled", and a
# scheduler reading 1 takes the job for failed. This wrapper passes COMMAND's output through, and
# when COMMAND ends non-zero after rank 0 logged "stopped by SIGTERM after step N ...; exit status
# S" it exits S instead; in every other case it exits with COMMAND's status.
set -uo pipefail

[ $# -gt 0 ] || { echo "usage: forward_sigterm.sh COMMAND [ARG...]" >&2; exit 2; }
marks="$(mktemp)"
trap 'rm -f "$marks"' EXIT

# stdout passes through a filter that keeps rank 0's stop line (one line a stop, so the file
# stays small whatever the log).
exec {out}> >(while IFS= read -r line || [ -n "$line" ]; do
  printf '%s\n' "$line"
  case "$line" in *"stopped by SIGTERM after step "*"exit status "*) printf '%s\n' "$line" >"$marks" ;; esac
done)
filter=$!
"$@" >&"$out" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM
# A trapped SIGTERM interrupts `wait` (status above 128) while COMMAND still runs: wait again.
status=
until [ -n "$status" ]; do
  wait "$pid"
  rc=$?
  if [ "$rc" -le 128 ]; then
    status=$rc
  elif ! kill -0 "$pid" 2>/dev/null; then
    # It ended meanwhile: its own status, unless this wait already took it (127: none left).
    wait "$pid"
    again=$?
    status=$((again == 127 ? rc : again))
  fi
done
exec {out}>&-
wait "$filter" 2>/dev/null

stop_line="$(tail -n 1 "$marks")"
if [ "$status" -ne 0 ] && [[ "$stop_line" =~ exit\ status\ ([0-9]+) ]]; then
  status="${BASH_REMATCH[1]}"
fi
exit "$status"
