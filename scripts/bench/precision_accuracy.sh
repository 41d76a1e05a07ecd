#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Does bfloat16 train as float32 does? `ringtrain train --precision fp32` and `--precision bf16`
# from the same seed on the real data sets, short runs: the MLP and the CNN on MNIST (test
# accuracy and loss at the end), gpt-mini on the fortunes corpus (validation loss every
# --gpt-eval-every steps). Prints a table per job and writes the summary JSON: each run's final
# test metrics, and the largest difference between the two precisions' training loss (logged
# every --log-every steps) and test/validation loss at the same step.
# The data: the MNIST sample (data/mnist), the fortunes (data/fortunes, scripts/mpirun/gpt-mini.conf
# otherwise), gpt-mini evaluated on 64
# validation sequences (all of them at the end). Logs and metrics.jsonl in OUT
# (default BUILD_DIR/precision-accuracy). Needs a CPU with AVX512-BF16.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_allow_mpirun_as_root

ringtrain_opt --build-dir build_dir "$root/build" "the build whose bin/ holds ringtrain"
ringtrain_opt --ranks ranks 1 "ranks"
ringtrain_opt --jobs jobs mlp,cnn,gpt "the jobs, of mlp, cnn, gpt"
ringtrain_opt --epochs epochs 2 "epochs of the MNIST sample"
ringtrain_opt --gpt-steps gpt_steps 150 "gpt-mini steps"
ringtrain_opt --gpt-eval-every gpt_eval_every 50 "gpt-mini's evaluation period"
ringtrain_opt --out out "" "folder of the logs (default BUILD_DIR/precision-accuracy)"
ringtrain_opt --json json "" "the summary (default OUT/summary.json)"
ringtrain_parse_args "$@"
out="${out:-$build_dir/precision-accuracy}"
json="${json:-$out/summary.json}"
mkdir -p "$out"
ringtrain="$build_dir/bin/ringtrain"

# run JOB PRECISION ARGS...: one training run, its log and metrics in OUT/JOB-PRECISION.
run() {
  local job="$1" precision="$2" dir="$out/$1-$2"
  shift 2
  rm -rf "$dir"
  mkdir -p "$dir"
  ringtrain_say "$job $precision: mpirun -np $ranks ringtrain train $* --precision $precision"
  local start=$SECONDS
  mpirun -np "$ranks" --oversubscribe "$ringtrain" train "$@" --precision "$precision" \
    --logdir "$dir" >"$dir/log.txt" 2>&1 || {
    echo "precision_accuracy.sh: $job $precision failed, see $dir/log.txt" >&2
    tail -5 "$dir/log.txt" >&2
    exit 1
  }
  echo $((SECONDS - start)) >"$dir/seconds"
}

IFS=, read -r -a job_list <<<"$jobs"
for job in "${job_list[@]}"; do
  for precision in fp32 bf16; do
    case "$job" in
      mlp | cnn)
        run "$job" "$precision" --model "$job" --data "$root/data/mnist" --epochs "$epochs" \
          --log-every 25 ;;
      gpt)
        run gpt "$precision" --config "$root/scripts/mpirun/gpt-mini.conf" \
          --data "$root/data/fortunes" --steps "$gpt_steps" --eval-every "$gpt_eval_every" ;;
      *) echo "precision_accuracy.sh: unknown job '$job' (mlp, cnn, gpt)" >&2; exit 2 ;;
    esac
  done
done

python3 - "$out" "$json" "${job_list[@]}" <<'PY'
import json, sys
out, path, jobs = sys.argv[1], sys.argv[2], sys.argv[3:]

def metrics(job, precision):
    rows = [json.loads(line) for line in open(f"{out}/{job}-{precision}/metrics.jsonl")]
    rows = [r for r in rows if "split" in r]
    return ({r["step"]: r for r in rows if r["split"] == "train"},
            {r["step"]: r for r in rows if r["split"] == "test"})

summary = {}
for job in jobs:
    (train32, test32), (train16, test16) = metrics(job, "fp32"), metrics(job, "bf16")
    def gap(a, b, key):
        steps = sorted(set(a) & set(b))
        return max((abs(b[s][key] - a[s][key]) for s in steps), default=float("nan")), len(steps)
    train_gap, train_points = gap(train32, train16, "loss")
    test_gap, test_points = gap(test32, test16, "loss")
    last32, last16 = test32[max(test32)], test16[max(test16)]
    seconds = {p: int(open(f"{out}/{job}-{p}/seconds").read()) for p in ("fp32", "bf16")}
    summary[job] = {"fp32": last32, "bf16": last16, "seconds": seconds,
                    "max_train_loss_gap": train_gap, "train_points": train_points,
                    "max_test_loss_gap": test_gap, "test_points": test_points}
    print(f"\n{job}: last evaluation at step {max(test32)}")
    print(f"  {'':6} {'test loss':>10} {'accuracy':>9} {'seconds':>8}")
    for p, last in (("fp32", last32), ("bf16", last16)):
        print(f"  {p:6} {last['loss']:>10.4f} {last.get('accuracy', float('nan')):>9.4f} "
              f"{seconds[p]:>8}")
    print(f"  largest |bf16 - fp32| loss at the same step: train {train_gap:.4f} over "
          f"{train_points} points, test {test_gap:.4f} over {test_points}")
json.dump(summary, open(path, "w"), indent=1)
print(json.dumps(summary))
PY
