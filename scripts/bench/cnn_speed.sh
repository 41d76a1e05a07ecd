#!/usr/bin/env bash
# CNN speed, ringtrain against PyTorch 1.13 in the same rounds (issue 25): the cnn of
# models/model_factory.cc (LeNet-style, 215,370 parameters), batch 64 per rank, one thread per
# rank, float32. A round runs, one after the other:
#   step ringtrain       model_step_perf --models cnn: forward + backward on one thread, one
#                        fixed batch, --repeats rounds of at least --seconds, median of them
#   step pytorch         pytorch_step_reference.py --model cnn: the same (zero_grad, forward,
#                        backward), and the same plus the SGD step (interleaved)
#   ringtrain 2 ranks    mpirun -np 2 --bind-to core ringtrain train --model cnn --synthetic
#   pytorch DDP 2 ranks  mpirun -np 2 --bind-to core pytorch_ddp_reference.py --model cnn (gloo)
# so that every ratio is taken between runs of the same minute (this VM's speed drifts, and
# other work on it slows both sides alike within a round). The summary gives the median and range
# over the rounds of each figure and of each ratio ringtrain / PyTorch; the one-core figures also
# in CPU time per step (each process's own), which other work on a shared machine leaves out
# (its wall times count the other processes' turns on the core). --compare-build DIR adds,
# in each round, the step and the 2-rank run of another build (a change's parent, say) as
# "@compare" rows: before and after in the same rounds. The 2-rank figures are samples/s of the
# whole run's training time (ringtrain's 'done:' line; PyTorch from a barrier after --warmup
# steps); GFLOP/s count the products only, as Model::trainingFlopsPerSample does. Both train with
# SGD, lr 0.01, momentum 0.9: at lr 0.1 a run may or may not diverge, depending on rounding.
#
#   scripts/bench/cnn_speed.sh [--build-dir DIR] [--compare-build DIR] [--rounds R]
#                              [--steps S] [--warmup W] [--seconds T] [--repeats N]
#                              [--backend auto|shm|ring|mpi] [--out DIR] [--json FILE]
#                              [--no-pytorch]
# Defaults: build/, 3 rounds, 300 training steps (PyTorch: 300 after 10 warm-up), step rounds of
# 1 s, 3 of them per round, backend auto. Prints a table; writes every run's JSON line to
# OUT/results.jsonl and the summary to --json (default OUT/summary.json); logs in OUT (default
# BUILD_DIR/cnn-speed). Needs Debian's python3-torch for /usr/bin/python3 (RINGTRAIN_TORCH_PYTHON
# names another interpreter); installed if missing, with libopenblas0-pthread, as gpt_speed.sh
# does. --no-pytorch leaves PyTorch out (ringtrain's rows only; the CI test uses it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../lib/common.sh
source "$root/scripts/lib/common.sh"
ringtrain_allow_mpirun_as_root
bench="$root/scripts/bench"

build_dir="$root/build" compare="" rounds=3 steps=300 warmup=10 seconds=1 repeats=3
backend=auto out="" json="" batch=64 pytorch=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --compare-build) compare="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --backend) backend="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --no-pytorch) pytorch=0; shift ;;
    *) echo "cnn_speed.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
ringtrain_need_count --rounds "$rounds"
ringtrain_need_count --steps "$steps"
ringtrain_need_count --repeats "$repeats"
ringtrain_need_count --warmup "$warmup" 0
[[ "$seconds" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "cnn_speed.sh: --seconds must be a number" >&2; exit 2; }
builds=("$build_dir")
[ -n "$compare" ] && builds+=("$compare")
if [ -n "$compare" ] && [ "$compare" = "$build_dir" ]; then
  echo "cnn_speed.sh: --compare-build is the --build-dir itself" >&2; exit 2
fi
for dir in "${builds[@]}"; do
  for program in ringtrain model_step_perf; do
    [ -x "$dir/bin/$program" ] || { echo "cnn_speed.sh: no $dir/bin/$program (build first)" >&2; exit 2; }
  done
done
out="${out:-$build_dir/cnn-speed}"
json="${json:-$out/summary.json}"
mkdir -p "$out"
torch_python="${RINGTRAIN_TORCH_PYTHON:-/usr/bin/python3}"
if [ "$pytorch" = 1 ] && ! "$torch_python" -c 'import torch' >/dev/null 2>&1; then
  # Debian's PyTorch finds BLAS through libblas.so.3; the reference BLAS would make it ~15x slower.
  ringtrain_install_packages python3-torch libopenblas0-pthread
fi
mpirun_cmd=(mpirun --bind-to core)
[ "$(nproc)" -ge 2 ] || mpirun_cmd+=(--oversubscribe)
results="$out/results.jsonl"
: >"$results"

# run ROUND CONFIG COMMAND...: runs it, keeps its log, appends its JSON line(s) to $results.
run() {
  local round="$1" config="$2" log
  shift 2
  log="$out/r$round-$config.log"
  echo "# round $round: $config" >&2
  "$@" >"$log" 2>&1 || { echo "cnn_speed.sh: $config failed, see $log" >&2; tail -5 "$log" >&2; exit 1; }
  python3 - "$round" "$config" "$log" "$out/r$round-$config.jsonl" >>"$results" <<'EOF'
import json, re, sys
round_, config, log, step_json = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
text = open(log).read()
if config.startswith("step-"):
    source = open(step_json).read() if config.startswith("step-ringtrain") else text
    for line in source.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            print(json.dumps({"round": round_, "config": config, "what": r["what"],
                              "ms_per_step": r["median_ms"], "gflops": r["gflops"],
                              "cpu_ms_per_step": r.get("median_cpu_ms")}))
else:
    m = re.search(r"done: .*?([\d.]+) samples/s", text) if config.startswith("ringtrain") else \
        re.search(r"([\d.]+) samples/s \(", text)
    if not m:
        sys.exit(f"cnn_speed.sh: no samples/s in {log}")
    print(json.dumps({"round": round_, "config": config, "samples_per_second": float(m.group(1))}))
EOF
}

# train ROUND CONFIG BUILD: ringtrain's 2-rank training run.
train() {
  run "$1" "$2" "${mpirun_cmd[@]}" -np 2 "$3/bin/ringtrain" train --model cnn --synthetic \
    --synthetic-size $((2 * batch * (steps + 1))) --batch-size "$batch" --steps "$steps" \
    --log-every 0 --eval-every 0 --optimizer sgd --lr 0.01 --momentum 0.9 --backend "$backend"
}

# step ROUND CONFIG BUILD: model_step_perf's cnn step on one core.
step() {
  run "$1" "$2" "${mpirun_cmd[@]}" -np 1 "$3/bin/model_step_perf" --models cnn --batch "$batch" \
    --seconds "$seconds" --repeats "$repeats" --gemm 0 --json "$out/r$1-$2.jsonl"
}

for round in $(seq "$rounds"); do
  step "$round" step-ringtrain "$build_dir"
  [ -n "$compare" ] && step "$round" step-ringtrain@compare "$compare"
  if [ "$pytorch" = 1 ]; then
    run "$round" step-pytorch "${mpirun_cmd[@]}" -np 1 "$torch_python" \
      "$bench/pytorch_step_reference.py" --model cnn --batch "$batch" --seconds "$seconds" \
      --repeats "$repeats"
  fi
  train "$round" ringtrain-2 "$build_dir"
  [ -n "$compare" ] && train "$round" ringtrain-2@compare "$compare"
  if [ "$pytorch" = 1 ]; then
    run "$round" pytorch-ddp-2 "${mpirun_cmd[@]}" -np 2 "$torch_python" \
      "$bench/pytorch_ddp_reference.py" --model cnn --batch-size "$batch" --steps "$steps" \
      --warmup "$warmup" --lr 0.01 --port $((20000 + RANDOM % 20000))
  fi
done

python3 "$bench/cnn_speed_summary.py" "$results" "$json" "$batch" "$steps" "$backend"
echo "# runs: $results, summary: $json, logs: $out/"
