#!/usr/bin/env bash
# A caller's environment does not reach the tests: ctest, run with variables that would change
# what ringtrain and the scripts do, still runs support_environment_probe in the clean
# environment. The probe run directly with the same variables must fail (it can tell).
#   environment_isolation_test.sh CTEST BUILD_DIR
set -uo pipefail
ctest="${1:?usage: environment_isolation_test.sh CTEST BUILD_DIR}"
build="${2:?usage: environment_isolation_test.sh CTEST BUILD_DIR}"
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=checks.sh
source "$here/checks.sh"
caller=(RINGTRAIN_BATCH_SIZE=0 RINGTRAIN_RANKS=9 OMP_NUM_THREADS=7 OPENBLAS_NUM_THREADS=3
  GOTO_NUM_THREADS=5 OMPI_COMM_WORLD_RANK=3 PMIX_RANK=1)
if output="$(env "${caller[@]}" bash "$here/environment_probe.sh" 2>&1)"; then
  fail "the probe, given the caller's variables directly, should fail" "$output"
else
  ok "the probe fails where the variables reach it"
fi
if output="$(env "${caller[@]}" "$ctest" --test-dir "$build" -R '^support_environment_probe$' \
  --output-on-failure 2>&1)" && grep -q '100% tests passed' <<<"$output"; then
  ok "under ctest the caller's variables do not reach the test"
else
  fail "under ctest the caller's variables reached the test" "$output"
fi
[ "$failures" -eq 0 ]
