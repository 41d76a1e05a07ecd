#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Gradient accumulation's benchmark: synthetic training of an MLP on N ranks with the same
# micro-batch B and --accumulate-steps K for each K asked for, over the same number of
# micro-batches, configurations interleaved over rounds. For each K: samples per second (median
# and range over the rounds) and the gradient all-reduce time per optimiser step and per 1000
# samples, from the runs' reports. Prints a table; writes JSON lines.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_allow_mpirun_as_root

ringtrain_opt --ranks ranks 2 "ranks"
ringtrain_opt --batch batch 32 "micro-batch per rank"
ringtrain_opt --accumulate accumulate "1 4" "the --accumulate-steps values compared"
ringtrain_opt --micro-batches micro 96 "micro-batches per rank in every run (steps = M / K)"
ringtrain_opt --hidden hidden 2048,2048 "the MLP's hidden sizes"
ringtrain_opt --backend backend ring "backend"
ringtrain_opt --rounds rounds 3 "rounds"
ringtrain_opt --out out "$root/build/accumulation-bench" "folder of the logs and results"
ringtrain_rest mpirun_args "passed to mpirun"
ringtrain_parse_args "$@"
ringtrain="${RINGTRAIN_BIN:-$root/build/bin/ringtrain}"
[ -x "$ringtrain" ] || { echo "accumulation.sh: no $ringtrain (build first)" >&2; exit 2; }
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"

# run K: one training run of round $round with --accumulate-steps K; appends a JSON line.
run() {
  local k="$1" log="$out/k$1-r$round.log"
  mpirun -np "$ranks" --bind-to core "${mpirun_args[@]}" "$ringtrain" train --synthetic \
    --synthetic-size $((ranks * batch * (micro + 1))) --model mlp --hidden "$hidden" \
    --batch-size "$batch" --accumulate-steps "$k" --steps $((micro / k)) --log-every 0 \
    --backend "$backend" >"$log" 2>&1 ||
    { cat "$log" >&2; echo "accumulation.sh: run k$k-r$round failed" >&2; exit 1; }
  local rate reduce
  rate="$(sed -n 's/.*done: .* training (.* wall), \([0-9.]*\) samples\/s.*/\1/p' "$log")"
  reduce="$(sed -n 's/.*gradient all-reduces took \([0-9.]*\) ms per step.*/\1/p' "$log")"
  printf '{"accumulate":%s,"round":%s,"ranks":%s,"batch":%s,"backend":"%s","samples_per_s":%s,"allreduce_ms_per_step":%s}\n' \
    "$k" "$round" "$ranks" "$batch" "$backend" "$rate" "${reduce:-0}" >>"$results"
}

echo "accumulation: mlp $hidden, $micro micro-batches of $batch per rank, $ranks ranks, backend $backend, $rounds round(s); $(nproc) cores; results in $results" >&2
for ((round = 1; round <= rounds; ++round)); do
  for k in $accumulate; do run "$k"; done
done

python3 - "$results" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
groups = collections.OrderedDict()
for r in rows:
    groups.setdefault(r["accumulate"], []).append(r)
print(f"{'accumulate':>10} {'samples/s':>9} {'range':>13} {'all-reduce ms/step':>18} "
      f"{'ms/1000 samples':>15}")
for k, rs in groups.items():
    rates = [r["samples_per_s"] for r in rs]
    reduce = statistics.median(r["allreduce_ms_per_step"] for r in rs)
    per_step = k * rs[0]["batch"] * rs[0]["ranks"]
    print(f"{k:>10} {statistics.median(rates):>9.0f} {min(rates):>6.0f}-{max(rates):<6.0f} "
          f"{reduce:>18.2f} {1000 * reduce / per_step:>15.2f}")
PY
