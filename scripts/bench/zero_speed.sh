#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# --zero 1 against --zero 0: the same GPT trained on N ranks with each --zero value in
# interleaved rounds (the values' order alternating from round to round). Per value: the time
# per step from the runs' reports (median and range over the rounds), and the median of each
# round's ratio of --zero 0's time to this value's (above 1: faster than --zero 0). Prints a
# table; writes JSON lines to OUT/results.jsonl and the summary to --json.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_allow_mpirun_as_root

ringtrain_opt --ranks ranks 2 "ranks"
ringtrain_opt --model-args model_args "--layers 4 --heads 4 --width 256 --context 128 --vocab 50257" "the GPT's options (default gpt-mini's)"
ringtrain_opt --batch batch 8 "batch per rank"
ringtrain_opt --steps steps 14 "steps per run"
ringtrain_opt --backend backend ring "backend (ring or tuned: those --zero 1 shards on)"
ringtrain_opt --rounds rounds 4 "rounds"
ringtrain_opt --out out "$root/build/zero-speed" "folder of the logs and results"
ringtrain_opt --json json "" "the summary as JSON (default OUT/summary.json)"
ringtrain_parse_args "$@"
ringtrain_need_count --ranks "$ranks"
ringtrain_need_count --batch "$batch"
ringtrain_need_count --steps "$steps"
ringtrain_need_count --rounds "$rounds"
ringtrain="${RINGTRAIN_BIN:-$root/build/bin/ringtrain}"
[ -x "$ringtrain" ] || { echo "zero_speed.sh: no $ringtrain (build first)" >&2; exit 2; }
mkdir -p "$out"
results="$out/results.jsonl"
: >"$results"
read -ra model <<<"$model_args"

# run Z: one training run of round $round with --zero Z; appends a JSON line.
run() {
  local zero="$1" log="$out/zero$1-r$round.log" ms
  mpirun -np "$ranks" --bind-to core "$ringtrain" train --model gpt --synthetic "${model[@]}" \
    --batch-size "$batch" --steps "$steps" --optimizer adamw --lr 3e-4 --weight-decay 0.1 \
    --backend "$backend" --zero "$zero" --eval-every 0 --log-every 0 >"$log" 2>&1 ||
    { cat "$log" >&2; echo "zero_speed.sh: run zero$zero-r$round failed" >&2; exit 1; }
  ms="$(sed -n 's/.*time per step: .*(\([0-9.]*\) ms per step).*/\1/p' "$log")"
  [ -n "$ms" ] || { cat "$log" >&2; echo "zero_speed.sh: no step time in $log" >&2; exit 1; }
  printf '{"zero":%s,"round":%s,"ranks":%s,"batch":%s,"backend":"%s","ms_per_step":%s}\n' \
    "$zero" "$round" "$ranks" "$batch" "$backend" "$ms" >>"$results"
}

echo "zero_speed: gpt $model_args, batch $batch per rank, $ranks ranks, backend $backend, $steps steps, $rounds round(s); $(nproc) cores; logs in $out" >&2
for ((round = 1; round <= rounds; ++round)); do
  if ((round % 2)); then order="0 1"; else order="1 0"; fi
  for zero in $order; do run "$zero"; done
done

python3 - "$results" "${json:-$out/summary.json}" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
time = {(r["zero"], r["round"]): r["ms_per_step"] for r in rows}
rounds = sorted({r["round"] for r in rows})
summary = []
print(f"{'zero':>4} {'ms/step (median, range)':>28} {'x zero 0 (median, range)':>28}")
for zero in (0, 1):
    ms = [time[zero, n] for n in rounds]
    ratio = [time[0, n] / time[zero, n] for n in rounds]
    summary.append({"zero": zero, "ms_per_step_median": statistics.median(ms),
                    "ms_per_step_range": [min(ms), max(ms)],
                    "ratio_to_zero0_median": statistics.median(ratio),
                    "ratio_to_zero0_range": [min(ratio), max(ratio)]})
    print(f"{zero:>4} {statistics.median(ms):>10.0f} ({min(ms):.0f}-{max(ms):.0f}) "
          f"{statistics.median(ratio):>14.2f} ({min(ratio):.2f}-{max(ratio):.2f})")
print("ratio: --zero 0's time per step over this value's in the same round; above 1: faster")
json.dump({"rounds": len(rounds), "points": summary}, open(sys.argv[2], "w"), indent=1)
PY
