#!/usr/bin/env bash
# The scaling sweep's machinery in its quick mode (scripts/mpirun/scaling_sweep.sh --quick): every
# part runs on namespaced hosts with tiny sizes, and the report has both targets, a training
# scaling table, no failed run, and PNG plots. It measures nothing: the numbers of a quick run are
# not benchmarks. Skipped (77) where network namespaces cannot be made.
#   scaling_sweep_quick_test.sh BIN_DIR
set -uo pipefail
bin="${1:?usage: scaling_sweep_quick_test.sh BIN_DIR}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "$(id -u)" -ne 0 ] || ! "$root/scripts/mpirun/netns_cluster.sh" --check >/dev/null 2>&1; then
  echo "SKIP: the sweep needs root and network namespaces"
  exit 77
fi
failures=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

if timeout 600 "$root/scripts/mpirun/scaling_sweep.sh" --quick --bin "$bin" --out "$work/out" >"$work/sweep.log" 2>&1; then
  ok "scaling_sweep.sh --quick ran every part"
else
  fail "scaling_sweep.sh --quick: exit status $?"
  tail -40 "$work/sweep.log"
  for log in "$work"/out/raw/*.log; do
    grep -qE "replicas identical|Avg bus bandwidth" "$log" || { echo "--- $log"; tail -15 "$log"; }
  done
fi

# Every measurement announced as run k of n, k counting 1 to n, n the runs recorded.
recorded="$(wc -l <"$work/out/raw/runs.jsonl")"
announced="$(grep -oE '\[run [0-9]+/[0-9]+\]' "$work/sweep.log" | tr -d '[]' | tr '\n' ' ')"
expected="$(for k in $(seq "$recorded"); do printf 'run %d/%d ' "$k" "$recorded"; done)"
if [ "$announced" = "$expected" ]; then ok "each run announced as [run k/$recorded]"; else fail "runs announced as: $announced (want $expected)"; fi

# What the report must hold, checked by python (json) rather than by pattern.
if /usr/bin/env python3 - "$work/out/scaling.json" <<'EOF'; then ok "scaling.json: both targets, training rows, allreduce rows, profile rows, no failed run"; else fail "scaling.json incomplete"; fi
import json, sys
r = json.load(open(sys.argv[1]))
problems = []
if r["failed_runs"]:
    problems.append(f"failed runs: {r['failed_runs']}")
a = r["targets"]["a_ring_busbw_share_of_link"]["rows"]
b = r["targets"]["b_engine_speedup_over_per_layer"]["rows"]
if sorted({(row["hosts"], row["mpirun_options"] == "Open MPI defaults") for row in a}) != [(2, False), (2, True)]:
    problems.append(f"target (a) rows, want 2 hosts with Open MPI's defaults and with eager chunks: {a}")
if {row["config"] for row in b} != {"mpi-per-layer", "ring-per-layer", "ring-fused", "ring-overlap",
                                    "ring-overlap-fp16", "ring-overlap-bf16"}:
    problems.append(f"target (b) configs: {[row['config'] for row in b]}")
if any(row["buckets"] < 2 for row in b if row["config"].endswith("per-layer")):
    problems.append("per-layer runs must have one bucket per layer")
train = [t for t in r["train"] if t["name"].startswith("train-")]
if len(train) != 2 + 2 * 3 or not all(t.get("replicas_identical") for t in train):
    problems.append(f"training runs: {[(t['name'], t.get('replicas_identical')) for t in train]}")
if not r["train_one_rank_samples_per_second"]:
    problems.append("no one-rank baseline")
if not any(x["name"].startswith("path-") for x in r["allreduce"]):
    problems.append("no unshaped path measurement")
if any(x["wrong"] for x in r["allreduce"]):
    problems.append("allreduce_perf counted wrong results")
rows = {(b["profile"], b["hosts"]): b for b in r["bench_rows"]}
if sorted(rows) != [("resnet50", 1), ("resnet50", 2)]:
    problems.append(f"profiles part: want resnet50 on 1 and 2 hosts, got {sorted(rows)}")
elif not (rows[("resnet50", 1)]["scaling_efficiency"] == 1.0
          and rows[("resnet50", 2)]["scaling_efficiency"] > 0
          and all(0 < b["fraction_of_bound"] and b["step_ms_p50"] >= b["compute_ms"] for b in rows.values())):
    problems.append(f"profiles part: implausible rows {list(rows.values())}")
for p in problems:
    print("  " + p)
sys.exit(1 if problems else 0)
EOF
if grep -q "Target (a)" "$work/out/tables.md" && grep -q "Target (b)" "$work/out/tables.md" &&
  grep -q "Training scaling" "$work/out/tables.md" && grep -q "Gradient profiles" "$work/out/tables.md"; then ok "tables.md has the scaling, target and profile tables"; else fail "tables.md lacks a table"; fi
if command -v gnuplot >/dev/null 2>&1; then
  for png in allreduce_busbw train_throughput train_efficiency profiles_scaling; do
    if [ "$(head -c 4 "$work/out/$png.png" 2>/dev/null | od -An -c | tr -d ' ')" = "211PNG" ]; then ok "$png.png is a PNG"; else fail "$png.png missing or not a PNG"; fi
  done
else
  echo "skip the plots: gnuplot is not installed"
fi
echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
