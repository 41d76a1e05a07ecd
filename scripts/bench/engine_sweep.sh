#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# The gradient engine's benchmark: synthetic training of a wide MLP (28.4 million parameters by
# default) on 1 rank and on N ranks with overlap on and off and fusion thresholds from 1 MiB to
# 128 MiB. For each run: samples per second, scaling efficiency against the 1-rank run of the same
# sweep, and from the run's timeline (scripts/bench/timeline_summary.py) the computation, the
# all-reduce time and the share of it that was exposed. Prints a table; writes JSON lines.
# --rounds R runs the whole sweep R times, configurations interleaved, and reports each
# configuration's mean with its range (a shared VM's speed drifts from run to run).
# --timeline-overhead adds to each round, for the default configuration, a run with and one
# without --timeline, to measure what recording costs.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_allow_mpirun_as_root

ringtrain_opt --ranks ranks 2 "ranks"
ringtrain_opt --steps steps 20 "steps of 64 samples per rank"
ringtrain_opt --hidden hidden 4096,4096,2048 "the MLP's hidden sizes"
ringtrain_opt --fusion fusions "1M 4M 8M 16M 32M 64M 128M" "fusion thresholds"
ringtrain_opt --overlap overlaps "on off" "overlap settings"
ringtrain_opt --compression compression none "compression"
ringtrain_opt --backend backend ring "backend"
ringtrain_opt --out out "$root/build/engine-sweep" "folder of the logs and results"
ringtrain_flag --timeline-overhead overhead "also measure what --timeline costs"
ringtrain_opt --rounds rounds 1 "rounds of the whole sweep"
ringtrain_rest mpirun_args "passed to mpirun"
ringtrain_parse_args "$@"
ringtrain="${RINGTRAIN_BIN:-$root/build/bin/ringtrain}"
[ -x "$ringtrain" ] || { echo "engine_sweep.sh: no $ringtrain (build first)" >&2; exit 2; }
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"
summary="$root/scripts/bench/timeline_summary.py"

# run CONFIG NP OVERLAP FUSION [EXTRA ARGS...]: one training run of round $round; appends a JSON
# line.
run() {
  local config="$1" np="$2" overlap="$3" fusion="$4"
  shift 4
  local name="$config-r$round"
  local log="$out/$name.log"
  mpirun -np "$np" --bind-to core "${mpirun_args[@]}" "$ringtrain" train --synthetic \
    --synthetic-size $((np * 64 * (steps + 1))) --model mlp --hidden "$hidden" --steps "$steps" \
    --log-every 0 --backend "$backend" --overlap "$overlap" --fusion-threshold "$fusion" \
    --compression "$compression" "$@" >"$log" 2>&1 ||
    { cat "$log" >&2; echo "engine_sweep.sh: run $name failed" >&2; exit 1; }
  local rate trace timeline='null'
  rate="$(sed -n 's/.*done: .* training (.* wall), \([0-9.]*\) samples\/s.*/\1/p' "$log")"
  trace="$(sed -n 's/.*timeline written to //p' "$log")"
  if [ -n "$trace" ]; then
    timeline="$(python3 "$summary" "$trace" --skip 2 --overlap "$overlap" --json)"
  fi
  printf '{"config":"%s","round":%s,"ranks":%s,"overlap":"%s","fusion":"%s","compression":"%s","backend":"%s","samples_per_s":%s,"timeline":%s}\n' \
    "$config" "$round" "$np" "$overlap" "$fusion" "$compression" "$backend" "$rate" "$timeline" \
    >>"$results"
}

echo "engine sweep: mlp $hidden, $steps steps of 64 samples per rank, backend $backend, compression $compression, $rounds round(s); $(nproc) cores; results in $results" >&2
for ((round = 1; round <= rounds; ++round)); do
  run single 1 off 8M
  for overlap in $overlaps; do
    for fusion in $fusions; do
      config="np$ranks-overlap-$overlap-fusion-$fusion"
      run "$config" "$ranks" "$overlap" "$fusion" --timeline "$out/$config-r$round.json"
    done
  done
  if [ "$overhead" -eq 1 ]; then
    run timeline-off "$ranks" on 8M
    run timeline-on "$ranks" on 8M --timeline "$out/timeline-on-r$round.json"
  fi
done

python3 - "$results" <<'EOF'
import collections, json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
groups = collections.OrderedDict()
for r in rows:
    groups.setdefault(r["config"], []).append(r)
mean = lambda xs: sum(xs) / len(xs)
single = mean([r["samples_per_s"] for r in groups["single"]])
print(f"{'configuration':<30} {'samples/s':>9} {'range':>11} {'efficiency':>10} "
      f"{'compute ms':>10} {'all-reduce ms':>13} {'exposed':>8}")
for config, rs in groups.items():
    rates = [r["samples_per_s"] for r in rs]
    eff = mean(rates) / (rs[0]["ranks"] * single)
    ts = [r["timeline"]["mean"] for r in rs if r["timeline"] and r["ranks"] > 1]
    cols = (f"{mean([t['compute_ms'] for t in ts]):>10.1f} "
            f"{mean([t['allreduce_ms'] for t in ts]):>13.1f} "
            f"{100 * mean([t['exposed_share'] for t in ts]):>7.0f}%") if ts else ""
    span = f"{min(rates):.0f}-{max(rates):.0f}"
    print(f"{config:<30} {mean(rates):>9.1f} {span:>11} {eff:>10.3f} {cols}")
if "timeline-on" in groups:
    off = mean([r["samples_per_s"] for r in groups["timeline-off"]])
    on = mean([r["samples_per_s"] for r in groups["timeline-on"]])
    print(f"timeline overhead: {off:.1f} samples/s without, {on:.1f} with "
          f"({100 * (1 - on / off):+.1f}%)")
EOF
