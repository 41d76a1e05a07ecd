#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# PyTorch models trained on 2 ranks three ways: DistributedDataParallel with gloo's all-reduce
# (ddp-gloo), DDP with ringtrain's communication hook (ddp-hook), and ringtrain.torch's
# DistributedOptimizer (optimizer), each run by examples/pytorch_synthetic_benchmark.py. Rounds
# are interleaved: each round runs every model every way (the ways' order rotating from round to
# round), so that the ways are measured minutes apart at most. The summary (a table, and JSON
# with --json) gives per model and way the median and range over the rounds of the samples per
# second of both ranks together, and the median of each round's ratio to ddp-gloo (above 1:
# faster than DDP with gloo). The issue's goal: at least 1.3 on mlp-28m, never below 1.0.
# Each run warms up --warmup steps, then times --iters timings of --batches steps. Installs
# python3-torch and python3-torchvision where missing
# (scripts/lib/common.sh). RINGTRAIN_PYTHON picks the interpreter (default /usr/bin/python3,
# Debian's, which python3-torch is built for).
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_opt --build build "$root/build" "the build; its python/ holds the ringtrain package (built first if missing)"
ringtrain_opt --rounds rounds 3 "rounds"
ringtrain_opt --models models mlp-28m,transformer,resnet50 "models of examples/pytorch_models.py"
ringtrain_opt --batch-size batch 32 "batch per rank (Horovod's)"
ringtrain_opt --warmup warmup 2 "warm-up steps of each run"
ringtrain_opt --batches batches 5 "steps per timing"
ringtrain_opt --iters iters 5 "timings per run"
ringtrain_opt --json json "" "the summary as JSON"
ringtrain_parse_args "$@"
ringtrain_need_count --rounds "$rounds"
ringtrain_need_count --warmup "$warmup"
ringtrain_need_count --batches "$batches"
ringtrain_need_count --iters "$iters"
ringtrain_need_count --batch-size "$batch"
python="${RINGTRAIN_PYTHON:-/usr/bin/python3}"
IFS=, read -ra model_list <<<"$models"
known="$(cd "$root/examples" && "$python" -c 'import pytorch_models; print(" ".join(pytorch_models.MODELS))' 2>/dev/null ||
  echo "tiny-mlp tiny-transformer mlp-28m transformer resnet50")"
for model in "${model_list[@]}"; do
  [[ " $known " == *" $model "* ]] || { ringtrain_say "error: --models: no model '$model' (one of: $known)"; exit 2; }
done
ringtrain_install_torch
ringtrain_allow_mpirun_as_root
[ -f "$build/python/ringtrain/__init__.py" ] || ringtrain_build "$build"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ways=(ddp-gloo ddp-hook optimizer)

for round in $(seq "$rounds"); do
  for model in "${model_list[@]}"; do
    for i in 0 1 2; do
      way="${ways[$(((i + round - 1) % 3))]}"
      ringtrain_say "round $round/$rounds: $model, $way"
      PYTHONPATH="$build/python" OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none "$python" \
        "$root/examples/pytorch_synthetic_benchmark.py" --model "$model" --mode "$way" \
        --batch-size "$batch" --num-warmup-batches "$warmup" \
        --num-batches-per-iter "$batches" --num-iters "$iters" >"$work/run.out" 2>&1 ||
        { cat "$work/run.out" >&2; exit 1; }
      total="$(sed -n 's/^Total img\/sec on 2 CPU(s): \([0-9.]*\) .*/\1/p' "$work/run.out")"
      [ -n "$total" ] || { cat "$work/run.out" >&2; ringtrain_say "error: no total in the output"; exit 1; }
      echo "{\"round\": $round, \"model\": \"$model\", \"way\": \"$way\", \"batch\": $batch, \"samples_per_s\": $total}" >>"$work/runs.jsonl"
    done
  done
done

"$python" - "$work/runs.jsonl" "$json" <<'PY'
import collections, json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
WAYS = ("ddp-gloo", "ddp-hook", "optimizer")
speed = collections.defaultdict(dict)  # (model, way) -> {round: samples/s}
batch = {}
for r in runs:
    speed[(r["model"], r["way"])][r["round"]] = r["samples_per_s"]
    batch[r["model"]] = r["batch"]
cell = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
print(f"{'model':>16} {'batch':>5} {'way':>10} {'samples/s, 2 ranks (median, range)':>36} "
      f"{'x ddp-gloo (median, range)':>28}")
summary, missed = [], []
for model in dict.fromkeys(r["model"] for r in runs):
    gloo = speed[(model, "ddp-gloo")]
    entry = {"model": model, "batch_per_rank": batch[model], "ways": {}}
    for way in WAYS:
        s = speed[(model, way)]
        ratios = [s[k] / gloo[k] for k in s if k in gloo]
        print(f"{model:>16} {batch[model]:>5} {way:>10} {cell(list(s.values())):>36} "
              f"{statistics.median(ratios):>15.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        entry["ways"][way] = {"samples_per_s": [s[k] for k in sorted(s)],
                              "median_samples_per_s": statistics.median(s.values()),
                              "ratio_to_ddp_gloo": ratios,
                              "median_ratio_to_ddp_gloo": statistics.median(ratios)}
        goal = 1.3 if model == "mlp-28m" else 1.0
        if way != "ddp-gloo" and statistics.median(ratios) < goal:
            missed.append(f"{model} {way} {statistics.median(ratios):.2f} < {goal}")
    summary.append(entry)
print("ratio: samples/s over DDP with gloo's in the same round; above 1: faster")
print("goal (mlp-28m at least 1.3, every model at least 1.0): " +
      ("met" if not missed else "missed: " + ", ".join(missed)))
if sys.argv[2]:
    json.dump({"rounds": len({r["round"] for r in runs}), "ranks": 2, "models": summary,
               "goal_missed": missed}, open(sys.argv[2], "w"), indent=1)
PY
