#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# One-GPU training throughput: `ringtrain train --device cuda` for the mlp and the cnn at batch
# 64, 256 and 1024 (TF32 off and on), beside scripts/bench/pytorch_gpu_reference.py (same models,
# batches, SGD with momentum 0.9) run in the same job, and the ratio ringtrain / PyTorch.
#
# ringtrain trains on the MNIST sample (--data, default data/mnist) for --steps steps (default
# 2000) and logs its rate every 200 steps; the figure is the median of those windows without the
# first (start-up, allocation), over the training steps alone (evaluation excluded). Prints a
# table and writes gpu_train_bench.json (and the logs) to --out (default: $OUT or ./bench-out).
# --prefetch and --gpu-conv-algorithms go to ringtrain (defaults: auto, on with cuda; plain); the
# rank is not bound to one core, so the prefetch thread does not share it with the thread that
# waits for the GPU.
set -uo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "$0")/../lib/args.sh"
cd "$ringtrain_root" || exit 2
ringtrain_opt --build build build "the build (with -DRINGTRAIN_CUDA=ON)"
ringtrain_opt --data data data/mnist "the MNIST folder"
ringtrain_opt --steps steps 2000 "training steps per run"
ringtrain_opt --out out "${OUT:-$PWD/bench-out}" "folder of the logs and the summary"
ringtrain_opt --prefetch prefetch auto "ringtrain's --prefetch: auto, on or off"
ringtrain_opt --models models "mlp cnn" "the models, space-separated"
ringtrain_opt --gpu-conv-algorithms algorithms plain "ringtrain's --gpu-conv-algorithms: plain, or any (cuDNN's FFT, Winograd and nondeterministic ones too, as PyTorch's cudnn.benchmark takes them)"
ringtrain_flag --no-reference no_reference "leave the PyTorch reference out"
ringtrain_parse_args "$@"
ringtrain=$build/bin/ringtrain
[[ -x $ringtrain ]] || { echo "gpu_train_bench.sh: no $ringtrain (build with -DRINGTRAIN_CUDA=ON)" >&2; exit 2; }
[[ -d $data ]] || { echo "gpu_train_bench.sh: no MNIST in $data (data/fetch_mnist.sh $data)" >&2; exit 2; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0

for tf32 in false true; do
  for model in $models; do
    for batch in 64 256 1024; do
      log="$out/ringtrain-$model-b$batch-tf32-$tf32.log"
      echo "== ringtrain $model batch $batch tf32 $tf32"
      if ! mpirun -np 1 --bind-to none "$ringtrain" train --device cuda --tf32="$tf32" \
          --model "$model" --batch-size "$batch" --steps "$steps" --log-every 200 --lr 0.01 \
          --momentum 0.9 --lr-schedule constant --prefetch "$prefetch" --gpu-conv-algorithms "$algorithms" --data "$data" \
          >"$log" 2>&1; then
        echo "   FAILED: see $log"; tail -5 "$log"; status=1
      fi
    done
  done
done

if [[ $no_reference -eq 0 ]]; then
  echo "== PyTorch reference"
  if ! python3 scripts/bench/pytorch_gpu_reference.py --batch 64 256 1024 --models $models \
      --json "$out/pytorch_gpu_reference.json" >"$out/pytorch_gpu_reference.log" 2>&1; then
    echo "   FAILED: see $out/pytorch_gpu_reference.log"; tail -5 "$out/pytorch_gpu_reference.log"
    status=1
  fi
fi

python3 - "$out" "$steps" "$algorithms" <<'PY' || status=1
import glob, json, os, re, statistics, sys
out, steps, algorithms = sys.argv[1], int(sys.argv[2]), sys.argv[3]
reference, reference_gpu = {}, None
path = os.path.join(out, "pytorch_gpu_reference.json")
if os.path.exists(path):
    loaded = json.load(open(path))
    reference_gpu = f"PyTorch {loaded['torch']} on {loaded['gpu']}"
    for r in loaded["runs"]:
        reference[(r["model"], r["batch"], bool(r["tf32"]))] = r["samples_per_s"]
rows = []
for log in sorted(glob.glob(os.path.join(out, "ringtrain-*.log"))):
    m = re.match(r"ringtrain-(\w+)-b(\d+)-tf32-(\w+)\.log", os.path.basename(log))
    model, batch, tf32 = m.group(1), int(m.group(2)), m.group(3) == "true"
    text = open(log).read()
    windows = [float(x) for x in re.findall(r"^.*step \d+/\d+ .*?([0-9]+) samples/s", text, re.M)]
    gpu = re.search(r"device cuda.*rank 0 on (GPU \d+ \([^)]*\))", text)
    convolutions = re.search(r"; convolutions: (.*)$", text, re.M)
    rate = statistics.median(windows[1:]) if len(windows) > 1 else None
    ref = reference.get((model, batch, tf32))
    rows.append({"model": model, "batch": batch, "tf32": tf32, "steps": steps,
                 "gpu_conv_algorithms": algorithms,
                 "samples_per_s": rate, "gpu": gpu.group(1) if gpu else None,
                 "convolutions": convolutions.group(1) if convolutions else None,
                 "pytorch_samples_per_s": ref,
                 "ratio": rate / ref if rate and ref else None})
rows.sort(key=lambda r: (r["tf32"], r["model"], r["batch"]))
fmt = lambda v, f: format(v, f) if v is not None else "-"
print(f"{'model':6} {'batch':>6} {'tf32':>5} {'ringtrain/s':>12} {'pytorch/s':>12} {'ratio':>6}")
for r in rows:
    print(f"{r['model']:6} {r['batch']:>6} {str(r['tf32']):>5} {fmt(r['samples_per_s'], '12.0f')} "
          f"{fmt(r['pytorch_samples_per_s'], '12.0f')} {fmt(r['ratio'], '6.2f')}")
if reference_gpu:
    print(f"# reference: {reference_gpu}")
with open(os.path.join(out, "gpu_train_bench.json"), "w") as f:
    json.dump({"runs": rows, "reference": reference_gpu}, f, indent=1)
print(f"# written: {os.path.join(out, 'gpu_train_bench.json')}")
PY
exit $status
