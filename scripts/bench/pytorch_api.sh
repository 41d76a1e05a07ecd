#!/usr/bin/env bash
# PyTorch models trained on 2 ranks three ways: DistributedDataParallel with gloo's all-reduce
# (ddp-gloo), DDP with ringtrain's communication hook (ddp-hook), and ringtrain.torch's
# DistributedOptimizer (optimizer), each run by examples/pytorch_synthetic_benchmark.py. Rounds
# are interleaved: each round runs every model every way (the ways' order rotating from round to
# round), so that the ways are measured minutes apart at most. The summary (a table, and JSON
# with --json) gives per model and way the median and range over the rounds of the samples per
# second of both ranks together, and the median of each round's ratio to ddp-gloo (above 1:
# faster than DDP with gloo). The issue's goal: at least 1.3 on mlp-28m, never below 1.0.
#
#   scripts/bench/pytorch_api.sh [--build DIR] [--rounds R] [--models M1,M2] [--batch-size B]
#                                [--warmup N] [--batches N] [--iters N] [--json FILE]
# --build defaults to build/ (its python/ holds the ringtrain package; built first if missing);
# --models to mlp-28m,transformer,resnet50 (examples/pytorch_models.py); --batch-size (per rank)
# to 32, Horovod's; each run warms up --warmup steps (2), then times --iters (5) timings of
# --batches steps (5). Installs python3-torch and python3-torchvision where missing
# (scripts/lib/common.sh). RINGTRAIN_PYTHON picks the interpreter (default /usr/bin/python3,
# Debian's, which python3-torch is built for).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib/common.sh
source "$root/scripts/lib/common.sh"
usage() {
  sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
}
build="$root/build" rounds=3 models=mlp-28m,transformer,resnet50 batch=32 json=""
warmup=2 batches=5 iters=5
while [ "$#" -gt 0 ]; do
  [ "$#" -ge 2 ] || usage
  case "$1" in
    --build) build="$2" ;;
    --rounds) rounds="$2" ;;
    --models) models="$2" ;;
    --batch-size) batch="$2" ;;
    --warmup) warmup="$2" ;;
    --batches) batches="$2" ;;
    --iters) iters="$2" ;;
    --json) json="$2" ;;
    *) usage ;;
  esac
  shift 2
done
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
