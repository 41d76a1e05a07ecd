#!/usr/bin/env bash
# The GPU benchmarks of docs/gpu.md, each beside its reference in the same run:
#   1. allreduce_perf on device buffers, nccl and hierarchical-nccl, 1 rank per GPU visible
#      (the column d2d copy bandwidth is the GPU's own memcpy, the ceiling of a 1-rank "all-reduce");
#   2. model_step_perf --device cuda next to --device cpu (mlp at batch 64, 256, 1024; cnn at 64);
#   3. scripts/bench/gpu_train_bench.sh: ringtrain train --device cuda beside the PyTorch reference.
#
#   scripts/gpu/device_bench.sh BUILD_DIR OUT_DIR
#
# Text and JSON go to OUT_DIR; a step that fails is named and the others still run.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build=${1:?usage: device_bench.sh BUILD_DIR OUT_DIR}
out=${2:?usage: device_bench.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
status=0
note() { printf '== %s\n' "$*" | tee -a "$out/summary.txt"; }

for backend in nccl hierarchical-nccl; do
  if timeout 300 mpirun -np "${gpus:-1}" "$build/bin/allreduce_perf" --device cuda \
      --backends "$backend" -b 8 -e 256M -f 4 --json "$out/allreduce_cuda_$backend.json" \
      >"$out/allreduce_cuda_$backend.txt" 2>&1; then
    note "allreduce_perf --device cuda $backend on $gpus rank(s): ok"
    tail -8 "$out/allreduce_cuda_$backend.txt"
  else
    note "allreduce_perf --device cuda $backend FAILED"; tail -10 "$out/allreduce_cuda_$backend.txt"; status=1
  fi
done

for batch in 64 256 1024; do
  for device in cpu cuda; do
    models=mlp
    [[ $batch -eq 64 ]] && models=mlp,cnn
    log="$out/model_step_$device-b$batch.txt"
    if timeout 300 "$build/bin/model_step_perf" --device "$device" --batch "$batch" \
        --models "$models" >"$log" 2>&1; then
      note "model_step_perf --device $device --batch $batch: ok"; cat "$log"
    else
      note "model_step_perf --device $device --batch $batch FAILED"; tail -10 "$log"; status=1
    fi
  done
done

if scripts/bench/gpu_train_bench.sh --build "$build" --out "$out/train" --steps 2000 \
    >"$out/gpu_train_bench.txt" 2>&1; then
  note "gpu_train_bench: ok"
else
  note "gpu_train_bench FAILED"; status=1
fi
tail -20 "$out/gpu_train_bench.txt"
exit $status
