#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Scaling efficiency from 1 to N ranks of `ringtrain train --synthetic` (by default the MLP
# 784-512-512-10, batch 64 per rank, one thread per rank, each rank bound to a core), for each
# backend side by side: throughput(N) / (N * throughput(1)). A round runs the 1-rank reference and
# then every backend on N ranks, one after the other, so that each figure is compared with a
# 1-rank run of the same minute (a shared VM's speed drifts by 10-20% from minute to minute);
# the summary gives each backend's median efficiency over the rounds, and the spread.
# Prints a table; writes one JSON line per run and a summary JSON.
# --compare-bin runs every backend a second time in each round with another ringtrain build (a
# change against its parent, say), as "BACKEND@compare", against the same 1-rank reference;
# with --compare-one-rank that build also runs its own 1-rank reference in each round and its
# figures are divided by that one (for a change that alters one rank's speed too).
# --pytorch runs, in each round, PyTorch DDP (gloo) on the same model, batch and number of ranks
# (scripts/bench/pytorch_ddp_reference.py, 1 and N ranks, placed by mpirun as ringtrain is) and
# gives each backend's N-rank throughput as a multiple of PyTorch's in the same round; it
# installs Debian's python3-torch and OpenBLAS when they are missing. Only the MLP is supported
# there: EXTRA RINGTRAIN ARGS other than --hidden are not passed to PyTorch.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_allow_mpirun_as_root

ringtrain_opt --ranks ranks 2 "ranks"
ringtrain_opt --steps steps 1500 "steps per run"
ringtrain_opt --rounds rounds 6 "rounds"
ringtrain_opt --backends backends "ring shm" "backends on N ranks"
ringtrain_opt --out out "$root/build/scaling-efficiency" "folder of the logs and results"
ringtrain_opt --compare-bin compare "" "another ringtrain, run beside in each round"
ringtrain_flag --compare-one-rank compare_one_rank "the compared build's own 1-rank reference"
ringtrain_flag --pytorch pytorch "PyTorch DDP (gloo) in each round"
ringtrain_rest extra "more ringtrain train options"
ringtrain_parse_args "$@"
ringtrain_fair_malloc  # for PyTorch and ringtrain alike, said in the output
echo "# $ringtrain_malloc_note"
ringtrain="${RINGTRAIN_BIN:-$root/build/bin/ringtrain}"
[ -x "$ringtrain" ] || { echo "scaling_efficiency.sh: no $ringtrain (build first)" >&2; exit 2; }
if [ -n "$compare" ] && [ ! -x "$compare" ]; then
  echo "scaling_efficiency.sh: --compare-bin $compare is not an executable" >&2
  exit 2
fi
if [ "$compare_one_rank" = 1 ] && [ -z "$compare" ]; then
  echo "scaling_efficiency.sh: --compare-one-rank needs --compare-bin" >&2
  exit 2
fi
# PyTorch's hidden sizes follow ringtrain's --hidden when one is passed after --.
pytorch_args=()
for ((i = 0; i < ${#extra[@]}; i++)); do
  if [ "${extra[i]}" = --hidden ] && [ $((i + 1)) -lt ${#extra[@]} ]; then
    pytorch_args=(--hidden "${extra[i + 1]}")
  fi
done
if [ "$pytorch" = 1 ]; then
  # Debian's PyTorch finds BLAS through libblas.so.3; the reference BLAS would make it ~15x slower.
  ringtrain_install_packages python3-torch libopenblas0-pthread
fi
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"

# run ROUND NP BACKEND [BINARY LABEL]: one training run; appends a JSON line with its samples per
# second and the per-step breakdown rank 0 prints, under LABEL (default: the backend).
run() {
  local round="$1" np="$2" backend="$3" binary="${4:-$ringtrain}" label="${5:-$3}"
  local log="$out/r$round-np$np-$label.log" command
  if [ "$backend" = pytorch ]; then
    command=(/usr/bin/python3 "$root/scripts/bench/pytorch_ddp_reference.py" --steps "$steps"
      --rendezvous "$log.rendezvous" "${pytorch_args[@]}")
  else
    command=("$binary" train --synthetic --steps "$steps" --log-every 0 --backend "$backend"
      "${extra[@]}")
  fi
  rm -f "$log.rendezvous"  # where PyTorch's ranks meet: never one left from an earlier run
  mpirun -np "$np" --bind-to core "${command[@]}" >"$log" 2>&1 ||
    { echo "scaling_efficiency.sh: run failed, see $log" >&2; exit 1; }
  python3 - "$log" "$round" "$np" "$label" >>"$results" <<'EOF'
import json, re, sys
log, round_, np_, backend = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
text = open(log).read()
sps = float(re.search(r"(\d+) samples/s \(", text).group(1))
m = re.search(r"data (\d+)%, forward\+backward (\d+)%, waiting for averaged gradients (\d+)%, "
              r"optimiser (\d+)% \(([\d.]+) ms per step\)", text)
row = {"round": round_, "ranks": np_, "backend": backend, "samples_per_second": sps}
if m:
    d, f, w, o, t = (float(x) for x in m.groups())
    row.update(step_ms=t, data_ms=d * t / 100, compute_ms=f * t / 100, wait_ms=w * t / 100,
               optimiser_ms=o * t / 100)
print(json.dumps(row))
EOF
}

for round in $(seq "$rounds"); do
  run "$round" 1 ring
  if [ "$compare_one_rank" = 1 ]; then run "$round" 1 ring "$compare" "ring@compare"; fi
  for backend in $backends; do
    run "$round" "$ranks" "$backend"
    if [ -n "$compare" ]; then run "$round" "$ranks" "$backend" "$compare" "$backend@compare"; fi
  done
  if [ "$pytorch" = 1 ]; then
    run "$round" 1 pytorch
    run "$round" "$ranks" pytorch
  fi
done

python3 - "$results" "$out/summary.json" "$ranks" "$steps" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
ranks, steps = int(sys.argv[3]), int(sys.argv[4])
# The 1-rank references: ringtrain's ("ring"), the compare build's own ("ring@compare", with
# --compare-one-rank) and PyTorch's ("pytorch"); each N-rank figure is divided by its own.
refs = {}
for r in rows:
    if r["ranks"] == 1:
        refs.setdefault(r["backend"], {})[r["round"]] = r["samples_per_second"]
one = refs["ring"]

def reference(backend):
    if backend == "pytorch":
        return "pytorch"
    if backend.endswith("@compare") and "ring@compare" in refs:
        return "ring@compare"
    return "ring"

backends = []
for r in rows:
    if r["ranks"] != 1 and r["backend"] not in backends:
        backends.append(r["backend"])
names = {"ring": "1 rank", "ring@compare": "1 r@compare", "pytorch": "pytorch x1"}
print(f"# ringtrain train --synthetic, {steps} steps, 1 and {ranks} ranks, rounds interleaved")
print(f"{'round':>5}" + "".join(f" {names[k]:>11}" for k in refs) +
      "".join(f" {b + ' x' + str(ranks):>14} {'eff':>6}" for b in backends))
eff = {b: [] for b in backends}
by_round = {}
for rnd in sorted(one):
    line = f"{rnd:>5}" + "".join(f" {refs[k][rnd]:>11.0f}" for k in refs)
    for b in backends:
        r = next(x for x in rows if x["round"] == rnd and x["backend"] == b and x["ranks"] == ranks)
        e = r["samples_per_second"] / (ranks * refs[reference(b)][rnd])
        r["efficiency"] = e
        eff[b].append(e)
        by_round[(rnd, b)] = r["samples_per_second"]
        line += f" {r['samples_per_second']:>14.0f} {e:>6.3f}"
    print(line)
summary = {"ranks": ranks, "steps": steps, "rounds": len(one),
           "one_rank_median": statistics.median(one.values()), "backends": {}}
for k in refs:
    if k != "ring":
        summary[k.replace("@", "_") + "_one_rank_median"] = statistics.median(refs[k].values())
for b in backends:
    s = {"median_efficiency": statistics.median(eff[b]), "min": min(eff[b]), "max": max(eff[b]),
         "median_samples_per_second": statistics.median(
             x["samples_per_second"] for x in rows if x["backend"] == b and x["ranks"] == ranks),
         "one_rank_reference": reference(b)}
    summary["backends"][b] = s
    print(f"# {b}: median efficiency {s['median_efficiency']:.3f} "
          f"(range {s['min']:.3f}-{s['max']:.3f}), median {s['median_samples_per_second']:.0f} "
          f"samples/s on {ranks} ranks; 1 rank ({names[reference(b)]}) median "
          f"{statistics.median(refs[reference(b)].values()):.0f}")
# Paired, round by round: how often each other backend beat the first one listed.
first = next((b for b in backends if b != "pytorch"), None)
for b in backends:
    if b in (first, "pytorch"):
        continue
    ahead = sum(1 for x, y in zip(eff[b], eff[first]) if x > y)
    summary["backends"][b]["rounds_ahead_of_" + first] = ahead
    print(f"# {b} ahead of {first} in {ahead} of {len(eff[b])} rounds")
# Against PyTorch DDP in the same round: N-rank throughput as a multiple of PyTorch's.
if "pytorch" in backends:
    for b in backends:
        if b == "pytorch":
            continue
        x = [by_round[(rnd, b)] / by_round[(rnd, "pytorch")] for rnd in sorted(one)]
        s = summary["backends"][b]
        s.update(times_pytorch_median=statistics.median(x), times_pytorch_min=min(x),
                 times_pytorch_max=max(x), rounds_at_least_3x_pytorch=sum(v >= 3 for v in x))
        print(f"# {b}: {statistics.median(x):.2f}x PyTorch DDP's {ranks}-rank throughput "
              f"(range {min(x):.2f}-{max(x):.2f}; at least 3x in {s['rounds_at_least_3x_pytorch']} "
              f"of {len(x)} rounds)")
json.dump(summary, open(sys.argv[2], "w"), indent=1)
EOF
echo "# runs: $results, summary: $out/summary.json, logs: $out/"
