# shellcheck shell=bash
# Sourced by the shell tests whose independent cases mostly wait (on mpirun's start-up and
# teardown, on a time-out), after they set $work (their temporary folder):
#   in_parallel COMMAND...  starts one case in the background, at most $parallel_cases (default
#                           3) at once, its output kept apart;
#   parallel_done           waits for every case started, prints each one's output once, in the
#                           order they started, and adds their FAIL lines to $failures (their ok
#                           lines to $passes, which tests/support/checks.sh counts).
# A case runs in a subshell: it changes no variable of the caller, and its verdict is what it
# prints, lines starting "ok" or "FAIL" (a case that prints neither is a failure). Its files are
# its own, made before it starts. Where the test sources tagged_ranks.sh, a case's ranks carry a
# RINGTRAIN_TEST_TAG of their own (the test's, ".N" appended): its check for ranks left behind
# sees its own, while the test's kill_own_ranks still reaches them all.

parallel_cases="${parallel_cases:-3}"
_parallel_reports="${work:?parallel_cases.sh: set \$work first}/parallel-cases"
_parallel_started=0
mkdir -p "$_parallel_reports"

in_parallel() {
  while [ "$(jobs -rp | wc -l)" -ge "$parallel_cases" ]; do wait -n || true; done
  _parallel_started=$((_parallel_started + 1))
  (
    if [ -n "${RINGTRAIN_TEST_TAG:-}" ]; then
      export RINGTRAIN_TEST_TAG="$RINGTRAIN_TEST_TAG.$_parallel_started"
    fi
    "$@"
  ) >"$_parallel_reports/$(printf %04d "$_parallel_started")" 2>&1 &
}

parallel_done() {
  wait
  local report found=0
  for report in "$_parallel_reports"/*; do
    [ -e "$report" ] || continue
    found=$((found + 1))
    cat "$report"
    failures=$((failures + $(grep -c '^FAIL' "$report")))
    passes=$((${passes:-0} + $(grep -c '^ok' "$report")))
    if ! grep -qE '^(ok|FAIL)' "$report"; then
      echo "FAIL case $found printed no verdict (ok or FAIL)"
      failures=$((failures + 1))
    fi
    rm -f "$report"
  done
  if [ "$found" -ne "$_parallel_started" ]; then
    echo "FAIL $_parallel_started cases started, $found reports"
    failures=$((failures + 1))
  fi
  _parallel_started=0
}
