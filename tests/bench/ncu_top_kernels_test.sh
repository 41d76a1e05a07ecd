#!/usr/bin/env bash
# shellcheck disable=SC2154  # failures is counted by checks.sh
# scripts/gpu/ncu_top_kernels.py on a sample of Nsight Compute's per-kernel summary (three blocks
# of an H200 run: times in ms and us, 2 to 24 invocations): kernels ordered by total time with
# their shares, the JSON's totals, and one line with exit 1 for a file without a summary.
#   ncu_top_kernels_test.sh SCRIPT SAMPLE
set -uo pipefail
script="${1:?usage: ncu_top_kernels_test.sh SCRIPT SAMPLE}"
sample="${2:?usage: ncu_top_kernels_test.sh SCRIPT SAMPLE}"
# shellcheck source=../support/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/checks.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

output="$(python3 "$script" "$sample" --json "$work/top.json" 2>&1)"
status=$?
if [ "$status" -eq 0 ]; then ok "exit status 0 on a summary"; else fail "exit status $status" "$output"; fi
# 2 x 8820 us, 24 x 101.27 us, 4 x 3.54 us, largest total first.
order="$(grep -oE 'dgrad2d_grouped_direct_kernel|biasTotalsKernel|reluBackwardKernel' <<<"$output" | tr '\n' ' ')"
if [ "$order" = "dgrad2d_grouped_direct_kernel biasTotalsKernel reluBackwardKernel " ]; then
  ok "ordered by total time"
else
  fail "order: $order" "$output"
fi
check "totals and shares" "$output" "   17640.0  87.8%      2    8820.0" "    2430.5  12.1%     24     101.3" \
  "(1x1x1, 256x1x1)" "# 3 kernels, 20084.6 us in all"
json="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["kernels"]), round(d["total_us"], 1), d["kernels"][1]["invocations"])' "$work/top.json" 2>&1)"
if [ "$json" = "3 20084.6 24" ]; then ok "JSON: every kernel and the total"; else fail "JSON: $json"; fi

printf 'ncu: nothing profiled\n' >"$work/empty.txt"
output="$(python3 "$script" "$work/empty.txt" 2>&1)"
status=$?
if [ "$status" -eq 1 ] && [ "$(wc -l <<<"$output")" -eq 1 ]; then
  check "a file without a summary: one line, exit 1" "$output" "no per-kernel summary" "$work/empty.txt"
else
  fail "a file without a summary: exit $status" "$output"
fi
[ "$failures" -eq 0 ]
