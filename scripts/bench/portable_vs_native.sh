#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# The portable build (the default: -march left to the compiler, the hot loops dispatched at run
# time) against a -march=native build on this machine, in interleaved rounds: each round runs
# every measurement with one build, then with the other, so that a ratio is taken within the
# same minute (this VM drifts by 10-30%). Measurements, 2 ranks bound to cores:
#   allreduce   allreduce_perf, ring, float32 sum, in place, at 8 B, 64 KiB, 2.6 MB (the MLP's
#               gradient), 64 MiB: time per call
#   allreduce16 the same at 64 MiB in bfloat16 (the conversions' loops)
#   mlp         ringtrain train --synthetic (the default MLP, batch 64, ring): samples/s
#   gpt         ringtrain train --synthetic --model gpt-mini, batch 4, context 64, ring: tokens/s
# The summary (a table, and JSON with --json) gives the median and range of each figure per build
# and of the ratio portable/native over the rounds (above 1: the portable build is faster).
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_opt --portable portable "$root/build" "the portable build (built first if missing)"
ringtrain_opt --native native "$root/build-native" "the -DRINGTRAIN_ARCH=native build (built when missing)"
ringtrain_opt --rounds rounds 3 "rounds"
ringtrain_opt --json json "" "the summary as JSON"
ringtrain_parse_args "$@"
ringtrain_need_count --rounds "$rounds"
ringtrain_allow_mpirun_as_root
[ -x "$portable/bin/ringtrain" ] || ringtrain_build "$portable"
[ -x "$native/bin/ringtrain" ] || ringtrain_build "$native" -DRINGTRAIN_ARCH=native
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpi=(mpirun -np 2 --bind-to core)

# measure ROUND BUILD_NAME BIN: one line of JSON per figure into $work/figures.jsonl.
measure() {
  local round="$1" name="$2" bin="$3" out
  for type in float bfloat16; do
    local sizes=(8 65536 2678824 67108864)
    [ "$type" = float ] || sizes=(67108864)
    for size in "${sizes[@]}"; do
      "${mpi[@]}" "$bin/allreduce_perf" -b "$size" -e "$size" -n 20 -w 5 -d "$type" --backends ring \
        --json "$work/ar.json" >/dev/null 2>&1
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]
print(json.dumps({"round": int(sys.argv[2]), "build": sys.argv[3], "figure": "allreduce %s %d B in place (us)" % (sys.argv[4], r["bytes"]), "value": r["in_place"]["time_us"], "higher_is_better": False}))' \
        "$work/ar.json" "$round" "$name" "$type" >>"$work/figures.jsonl"
    done
  done
  out="$("${mpi[@]}" "$bin/ringtrain" train --synthetic --steps 300 --log-every 100 --backend ring 2>&1)"
  python3 -c 'import json,re,sys; m=re.search(r"done: .*?([0-9,]+) samples/s", sys.argv[1])
print(json.dumps({"round": int(sys.argv[2]), "build": sys.argv[3], "figure": "mlp training (samples/s)", "value": float(m.group(1).replace(",", "")), "higher_is_better": True}))' \
    "$out" "$round" "$name" >>"$work/figures.jsonl"
  out="$("${mpi[@]}" "$bin/ringtrain" train --synthetic --model gpt-mini --context 64 --batch-size 4 \
    --synthetic-size 4096 --steps 12 --log-every 6 --eval-every 0 --backend ring 2>&1)"
  python3 -c 'import json,re,sys; m=re.search(r"done: .*?([0-9,]+) tokens/s", sys.argv[1])
print(json.dumps({"round": int(sys.argv[2]), "build": sys.argv[3], "figure": "gpt-mini training (tokens/s)", "value": float(m.group(1).replace(",", "")), "higher_is_better": True}))' \
    "$out" "$round" "$name" >>"$work/figures.jsonl"
}

for round in $(seq "$rounds"); do
  ringtrain_say "round $round/$rounds: portable build"
  measure "$round" portable "$portable/bin"
  ringtrain_say "round $round/$rounds: native build"
  measure "$round" native "$native/bin"
done

python3 - "$work/figures.jsonl" "$json" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(dict)
for r in rows:
    by[r["figure"]].setdefault(r["build"], {})[r["round"]] = r["value"]
summary = []
print(f"{'figure':<44} {'portable (median, range)':>28} {'native (median, range)':>28} {'portable/native':>22}")
for figure, builds in by.items():
    p, n = builds["portable"], builds["native"]
    higher = next(r["higher_is_better"] for r in rows if r["figure"] == figure)
    ratios = [(p[k] / n[k]) if higher else (n[k] / p[k]) for k in p if k in n]
    cell = lambda v: f"{statistics.median(v):.4g} ({min(v):.4g}-{max(v):.4g})"
    print(f"{figure:<44} {cell(list(p.values())):>28} {cell(list(n.values())):>28} {cell(ratios):>22}")
    summary.append({"figure": figure, "portable": sorted(p.values()), "native": sorted(n.values()),
                    "speed_ratio_portable_over_native": sorted(ratios),
                    "median_ratio": statistics.median(ratios)})
print("speed ratio: above 1, the portable build is faster (for times, native time / portable time)")
if sys.argv[2]:
    json.dump({"rounds": len({r["round"] for r in rows}), "figures": summary}, open(sys.argv[2], "w"), indent=1)
PY
