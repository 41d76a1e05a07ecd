#!/usr/bin/env bash
# allreduce_perf under a memory limit (ulimit -v) too small for its two buffers: every rank ends
# non-zero within seconds, and the job prints one line naming the size it could not allocate (not
# a bare std::bad_alloc).
#   allreduce_perf_memory_test.sh ALLREDUCE_PERF MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
perf="$1"
shift
mpirun=("$@")
# shellcheck source=tests/support/checks.sh
source "$(dirname "$0")/../support/checks.sh"

# 2 GiB of address space per process; two buffers of 1.5 GiB (3 GiB on each of the 2 ranks, within
# the machine's memory, which allreduce_perf checks first) cannot fit in it.
start=$SECONDS
output="$(
  ulimit -v $((2 << 20))
  # shellcheck disable=SC2016  # expanded by each rank's shell
  timeout 60 "${mpirun[@]}" -np 2 bash -c '"$0" "$@"; echo "rank exit $?"' "$perf" \
    -b 1M -e 1536M -n 1 -w 0 2>&1
)"
line="allocating the two host buffers of --maxbytes 1610612736 bytes (1.50 GiB) each failed"
if [ "$(grep -c '^rank exit [1-9]' <<<"$output")" -ne 2 ] || [ $((SECONDS - start)) -ge 30 ]; then
  fail "not every rank ended non-zero within 30 s" "$output"
elif [ "$(grep -cF "$line" <<<"$output")" -ne 1 ]; then
  fail "the size is not named once" "$output"
else
  ok "under ulimit -v 2 GiB: $(grep -F "$line" <<<"$output")"
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
