#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# ringtrain.torch's collectives against torch.distributed on gloo, on the same ranks, in
# interleaved rounds (the ways' order alternating from round to round): rt.allreduce_,
# rt.allgather, rt.reducescatter and a grouped all-reduce of 64 tensors, from 4 B to 64 MiB.
# Per op and size: each way's microseconds per call (median and range over the rounds) and the
# median of the rounds' ratios gloo / ringtrain (above 1: ringtrain faster). gloo has no
# reduce_scatter on CPUs: its way there is all_reduce and a copy of the rank's part. Both ways run
# with glibc's malloc thresholds raised (docs/api.md: its defaults fault large blocks back in on
# every call). Prints a table; writes JSON lines to OUT/results.jsonl and the summary to --json.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_allow_mpirun_as_root

ringtrain_opt --ranks ranks 2 "ranks"
ringtrain_opt --sizes sizes "4,64,1024,16384,262144,1048576,4194304,16777216,67108864" "bytes per rank, comma-separated"
ringtrain_opt --ops ops "allreduce,allgather,reducescatter,grouped" "operations, comma-separated"
ringtrain_opt --seconds seconds 0.3 "seconds of calls per point"
ringtrain_opt --rounds rounds 3 "rounds"
ringtrain_opt --out out "$root/build/torch-collectives" "folder of the logs and results"
ringtrain_opt --json json "" "the summary as JSON (default OUT/summary.json)"
ringtrain_parse_args "$@"
ringtrain_need_count --ranks "$ranks"
ringtrain_need_count --rounds "$rounds"
[[ "$sizes" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "torch_collectives.sh: --sizes '$sizes': expected numbers separated by commas" >&2; exit 2; }
[[ "$ops" =~ ^(allreduce|allgather|reducescatter|grouped)(,(allreduce|allgather|reducescatter|grouped))*$ ]] ||
  { echo "torch_collectives.sh: --ops '$ops': expected allreduce, allgather, reducescatter or grouped, comma-separated" >&2; exit 2; }
python_package="${RINGTRAIN_BUILD_DIR:-$root/build}/python"
[ -d "$python_package/ringtrain" ] || { echo "torch_collectives.sh: no $python_package/ringtrain (build first)" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "torch_collectives.sh: python3-torch is not installed" >&2; exit 2; }
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"

# run WAY: one mpirun of that way over every op and size; appends its JSON lines.
run() {
  local way="$1" log="$out/$1-r$round.log"
  rm -f "$out/$1-r$round.rendezvous"  # where PyTorch's ranks meet: never one from an earlier run
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 BENCH_RENDEZVOUS="$out/$1-r$round.rendezvous" \
    GLOO_SOCKET_IFNAME=lo PYTHONPATH="$python_package" \
    mpirun -np "$ranks" --oversubscribe -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x BENCH_RENDEZVOUS \
    -x GLOO_SOCKET_IFNAME -x PYTHONPATH -x MALLOC_MMAP_THRESHOLD_ -x MALLOC_TRIM_THRESHOLD_ /usr/bin/python3 "$root/scripts/bench/torch_collectives.py" \
    "$way" "$round" "$sizes" "$ops" "$seconds" >"$log" 2>&1 ||
    { cat "$log" >&2; echo "torch_collectives.sh: run $way-r$round failed" >&2; exit 1; }
  grep '^{' "$log" >>"$results"
}

ringtrain_fair_malloc
echo "torch_collectives: $ranks ranks, ops $ops, $rounds round(s), $seconds s a point; $(nproc) cores; logs in $out; $ringtrain_malloc_note" >&2
for ((round = 1; round <= rounds; ++round)); do
  if ((round % 2)); then order="ringtrain gloo"; else order="gloo ringtrain"; fi
  for way in $order; do run "$way"; done
done

python3 - "$results" "${json:-$out/summary.json}" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
us = {(r["way"], r["op"], r["bytes"], r["round"]): r["us"] for r in rows}
points = sorted({(r["op"], r["bytes"]) for r in rows}, key=lambda p: (p[0], p[1]))
rounds = sorted({r["round"] for r in rows})
notes = {(r["op"], r["bytes"]): r["note"] for r in rows if r["note"]}
def spread(way, op, size):
    values = [us[(way, op, size, k)] for k in rounds if us.get((way, op, size, k)) is not None]
    if not values:
        return None, "n/a"
    return statistics.median(values), f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
summary = []
print(f"{'op':<14} {'bytes':>10} {'ringtrain us':>26} {'gloo us':>26} {'gloo/ringtrain':>22}")
for op, size in points:
    mine, mine_text = spread("ringtrain", op, size)
    theirs, theirs_text = spread("gloo", op, size)
    ratios = [us[("gloo", op, size, k)] / us[("ringtrain", op, size, k)] for k in rounds
              if us.get(("gloo", op, size, k)) and us.get(("ringtrain", op, size, k))]
    ratio = statistics.median(ratios) if ratios else None
    ratio_text = f"{ratio:.2f} ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "n/a"
    print(f"{op:<14} {size:>10} {mine_text:>26} {theirs_text:>26} {ratio_text:>22}")
    summary.append({"op": op, "bytes": size, "ringtrain_us": mine, "gloo_us": theirs,
                    "gloo_over_ringtrain": ratio, "gloo_note": notes.get((op, size), "")})
json.dump({"rounds": len(rounds), "points": summary}, open(sys.argv[2], "w"), indent=1)
print(f"summary: {sys.argv[2]}")
PY
