#!/usr/bin/env bash
# scripts/test.sh refuses, within seconds and with exit status 2, a long option that is neither its
# own nor ctest's (ctest would pass over it and the run would go on without the step the option
# meant), and keeps ctest's own (checked with --help, which exits at once). A broken refusal would
# start a whole run: the timeout and a build folder of its own bound that.
#   test_script_options_test.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/support/checks.sh
source "$root/tests/support/checks.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export RINGTRAIN_BUILD_DIR="$work/build"

for typo in --ful --no-tsn --sanitise; do
  start=$SECONDS
  output="$(timeout 120 bash "$root/scripts/test.sh" "$typo" --no-torch </dev/null 2>&1)"
  status=$?
  if [ "$status" -eq 2 ] && [ $((SECONDS - start)) -lt 60 ]; then
    check "$typo: refused" "$output" "error: unknown option '$typo'"
  else
    fail "$typo: exit status $status after $((SECONDS - start)) s, want 2 within seconds" "$output"
  fi
done
if [ -e "$work/build" ]; then fail "a build folder was made"; else ok "nothing built"; fi
output="$(timeout 60 bash "$root/scripts/test.sh" --help 2>&1)"
check "--help" "$output" "usage: test.sh" "--full" "any other argument goes to ctest"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
