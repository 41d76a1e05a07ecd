# shellcheck shell=bash
# shellcheck disable=SC2154  # $ringtrain is the caller's
# Sourced by the end-to-end tests that start `ringtrain` under mpirun: their ranks carry the tag
# RINGTRAIN_TEST_TAG in their environment (mpirun passes it on), so that a test finds and kills
# its own ranks and never another test's running beside it. The caller sets $ringtrain (the
# binary) and exports RINGTRAIN_TEST_TAG before starting any job. A case run by parallel_cases.sh
# tags its ranks TAG.N: they are the test's as well as the case's.

# The ids of this test's ringtrain processes still alive.
own_ranks() {
  local pid tag="${RINGTRAIN_TEST_TAG//./\\.}"
  for pid in $(pgrep -f "^$ringtrain "); do
    grep -qz "^RINGTRAIN_TEST_TAG=$tag\\(\\.[0-9.]*\\)\\{0,1\\}\$" "/proc/$pid/environ" 2>/dev/null &&
      echo "$pid"
  done
}

kill_own_ranks() { own_ranks | xargs -r kill -KILL 2>/dev/null; }

# 0 once no rank of this test is left (waits up to 5 s), 1 otherwise.
own_ranks_gone() {
  local i
  for ((i = 0; i < 50; ++i)); do
    [[ -z "$(own_ranks)" ]] && return 0
    sleep 0.1
  done
  return 1
}
