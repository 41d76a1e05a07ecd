#!/usr/bin/env bash
# model_step_perf --stage-times on a small GPT and the MLP, quickly: one row per stage and the
# rest, the JSON's stage lines with times, every GPT stage charged and the shares within the
# step, and the MLP's time only in products and the loss (it has no attention, layer norm, GELU
# or embeddings). No speed is judged: benchmarks are not timed tests.
#   model_step_stages_test.sh BUILD_DIR
# shellcheck disable=SC2154  # $work is set by ringtrain_test_start (args.sh)
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
perf="$1/bin/model_step_perf"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
stages=("products" "attention (mask, softmax)" "layer norm" "GELU" "embeddings"
  "loss (softmax, cross-entropy)")
quick=(--stage-times --seconds 0.05 --repeats 1 --gemm 0)

if output="$("$perf" --models gpt --gpt-batch 1 --vocab 500 "${quick[@]}" --json "$work/gpt.json" 2>&1)"; then
  ok "gpt: exit status 0"
else
  fail "gpt: exit status $?" "$output"
fi
check "gpt: a row per stage, the rest and the copy bandwidth" "$output" "${stages[@]}" \
  "the rest (adds, biases, copies)" "one-core copy:"
# Each stage line of the JSON: its name, ms > 0 and the share; the shares add up to at most 1.
if python3 - "$work/gpt.json" "${stages[@]}" <<'PY'; then
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if '"stage"' in line]
names = [row["stage"] for row in rows]
assert names == sys.argv[2:], names
assert all(row["ms"] > 0 and row["copy_gbps"] > 0 for row in rows), rows
share = sum(row["share"] for row in rows)
assert 0.5 < share <= 1.0, share
assert rows[0]["gflops"] > 0 and all(row["gbps"] > 0 for row in rows[1:]), rows
PY
  ok "gpt: the JSON's six stages, each charged, shares within the step"
else
  fail "gpt: the JSON's stage lines" "$(cat "$work/gpt.json")"
fi

"$perf" --models mlp --batch 16 "${quick[@]}" --json "$work/mlp.json" >"$work/mlp.out" 2>&1 ||
  fail "mlp: exit status $?" "$(cat "$work/mlp.out")"
if python3 - "$work/mlp.json" <<'PY'; then
import json, sys
ms = {row["stage"]: row["ms"] for row in map(json.loads, open(sys.argv[1])) if "stage" in row}
assert ms["products"] > 0 and ms["loss (softmax, cross-entropy)"] > 0, ms
assert all(v == 0 for k, v in ms.items() if k not in ("products", "loss (softmax, cross-entropy)")), ms
PY
  ok "mlp: time in products and the loss only"
else
  fail "mlp: the JSON's stage lines" "$(cat "$work/mlp.json")"
fi

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
