#!/usr/bin/env bash
# Run by ctest: fails when the test environment holds what support/test_environment.cmake.in
# removes or pins (a caller's RINGTRAIN_* variables, thread counts, another MPI job's rank).
set -uo pipefail
# shellcheck source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"
leaked="$(env | grep -E '^(RINGTRAIN|GOTO|OMPI_COMM_WORLD|PMIX|PMI)_' || true)"
if [ -z "$leaked" ]; then ok "no RINGTRAIN_*, GOTO_* or other job's rank variables"; else fail "variables reached the test" "$leaked"; fi
if [ "${OMP_NUM_THREADS:-}" = 1 ] && [ "${OPENBLAS_NUM_THREADS:-}" = 1 ]; then
  ok "one thread for OpenMP and OpenBLAS"
else
  fail "OMP_NUM_THREADS='${OMP_NUM_THREADS:-}' OPENBLAS_NUM_THREADS='${OPENBLAS_NUM_THREADS:-}', expected 1"
fi
[ "$failures" -eq 0 ]
