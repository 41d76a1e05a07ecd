#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# The tuned backend (each all-reduce's algorithm from its tuning table) against MPI_Allreduce on
# the same buffers, 2 ranks bound to cores, float32 sum, at every power of two from 8 B to --max,
# in interleaved rounds: each round runs every size as one allreduce_perf call with both backends
# (their order alternating from round to round), so that the two times of a size are taken
# seconds apart (this VM drifts by 10-30%, more while others build). The summary (a table, and
# JSON with --json) gives per size the median and range over the rounds of each backend's time
# per call, in place and out of place, and of the speed ratio mpi time / tuned time (above 1:
# tuned is faster).
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_opt --build build "$root/build" "the build (built first if missing)"
ringtrain_opt --rounds rounds 3 "rounds"
ringtrain_opt --max max 256M "the largest size"
ringtrain_opt --tuning-file tuning_file "" "the tuning table (default the built-in one)"
ringtrain_opt --json json "" "the summary as JSON"
ringtrain_parse_args "$@"
tuning=()
[ -z "$tuning_file" ] || tuning=(--tuning-file "$tuning_file")
ringtrain_need_count --rounds "$rounds"
ringtrain_allow_mpirun_as_root
[ -x "$build/bin/allreduce_perf" ] || ringtrain_build "$build"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpi=(mpirun -np 2 --bind-to core)
maxbytes="$(python3 -c 'import sys; t=sys.argv[1].upper().rstrip("B"); m={"K":1<<10,"M":1<<20,"G":1<<30}
print(int(float(t[:-1])*m[t[-1]]) if t[-1] in m else int(t))' "$max")"

for round in $(seq "$rounds"); do
  order=tuned,mpi
  [ $((round % 2)) -eq 0 ] && order=mpi,tuned
  ringtrain_say "round $round/$rounds ($order), 8 B to $max"
  for ((size = 8; size <= maxbytes; size *= 2)); do
    "${mpi[@]}" "$build/bin/allreduce_perf" -b "$size" -e "$size" -n 20 -w 5 --backends "$order" \
      "${tuning[@]}" --json "$work/r.json" >"$work/r.out" 2>&1 || { cat "$work/r.out" >&2; exit 1; }
    python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(json.dumps({"round": int(sys.argv[2]), "backend": r["backend"], "bytes": r["bytes"],
                      "out_of_place": r["out_of_place"]["time_us"], "in_place": r["in_place"]["time_us"]}))' \
      "$work/r.json" "$round" >>"$work/times.jsonl"
  done
  grep -m1 '^#  tuned: ' "$work/r.out" >"$work/table.txt" || true
done

python3 - "$work/times.jsonl" "$json" "$(cat "$work/table.txt")" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
times = collections.defaultdict(dict)  # (bytes, placement) -> backend -> {round: us}
for r in rows:
    for placement in ("in_place", "out_of_place"):
        times[(r["bytes"], placement)].setdefault(r["backend"], {})[r["round"]] = r[placement]
cell = lambda v: f"{statistics.median(v):.4g} ({min(v):.4g}-{max(v):.4g})"
print(sys.argv[3].lstrip("# ").strip() or "tuned: (table not printed)")
print(f"{'size (B)':>10} {'placement':>12} {'tuned us (median, range)':>28} {'mpi us (median, range)':>28} {'mpi/tuned (median, range)':>26}")
summary, slower = [], []
for (size, placement), by in sorted(times.items()):
    t, m = by["tuned"], by["mpi"]
    ratios = [m[k] / t[k] for k in t if k in m]
    print(f"{size:>10} {placement:>12} {cell(list(t.values())):>28} {cell(list(m.values())):>28} {cell(ratios):>26}")
    summary.append({"bytes": size, "placement": placement, "tuned_us": sorted(t.values()),
                    "mpi_us": sorted(m.values()), "speed_ratio_mpi_over_tuned": sorted(ratios),
                    "median_ratio": statistics.median(ratios)})
    if statistics.median(ratios) < 1: slower.append(f"{size} B {placement}")
print("speed ratio: mpi time / tuned time, above 1: tuned is faster")
print("tuned slower than mpi (median) at: " + (", ".join(slower) if slower else "no size"))
if sys.argv[2]:
    json.dump({"rounds": len({r["round"] for r in rows}), "table": sys.argv[3], "sizes": summary},
              open(sys.argv[2], "w"), indent=1)
PY
