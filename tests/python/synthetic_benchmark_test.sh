#!/usr/bin/env bash
# examples/pytorch_synthetic_benchmark.py on 2 ranks with tiny sizes: ResNet-50 (batch 2 of
# 32 x 32 images) through DistributedOptimizer with 16-bit all-reduces, the small transformer
# through DDP with ringtrain's hook (16-bit) and with gloo; each prints its iterations and
# Horovod's "Img/sec per CPU" and "Total img/sec" lines as mean +-1.96 sigma. Bad options exit 2.
# No speed is judged. SKIP (77) without python3-torch or python3-torchvision.
#   synthetic_benchmark_test.sh BUILD_DIR PYTHON MPIEXEC [MPIEXEC_FLAGS...]
set -uo pipefail
build="${1:?usage: synthetic_benchmark_test.sh BUILD_DIR PYTHON MPIEXEC [FLAGS...]}"
python="${2:?}"
mpiexec="${3:?}"
shift 3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
benchmark="$here/../../examples/pytorch_synthetic_benchmark.py"
# shellcheck source=../support/checks.sh
source "$here/../support/checks.sh"
if ! "$python" -c 'import torch, torchvision' 2>/dev/null; then
  echo "SKIP: needs python3-torch and python3-torchvision"
  exit 77
fi
export PYTHONPATH="$build/python" OMP_NUM_THREADS=1

# run NAME ARGS...: the benchmark on 2 ranks, 1 warm-up step and 3 timings of 1 step.
run() {
  local name="$1"
  shift
  output="$(timeout 120 "$mpiexec" -np 2 "${MPIEXEC_FLAGS[@]}" "$python" "$benchmark" --threads 1 \
    --num-warmup-batches 1 --num-batches-per-iter 1 --num-iters 3 "$@" 2>&1)"
  local status=$?
  [ "$status" -eq 0 ] || { fail "$name: exit status $status" "$output"; return; }
  check "$name: model, batch and ranks named" "$output" "Model: $2" "Batch size: $4" \
    "Number of CPUs: 2"
  [ "$(grep -cE '^Iter #[0-9]: [0-9.]+ img/sec per CPU$' <<<"$output")" -eq 3 ] &&
    ok "$name: 3 iterations" || fail "$name: not 3 'Iter #' lines" "$output"
  grep -qE '^Img/sec per CPU: [0-9.]+ \+-[0-9.]+$' <<<"$output" &&
    grep -qE '^Total img/sec on 2 CPU\(s\): [0-9.]+ \+-[0-9.]+$' <<<"$output" &&
    ok "$name: per rank and total as mean +-1.96 sigma" || fail "$name: no summary lines" "$output"
}
MPIEXEC_FLAGS=("$@")
run resnet50 --model resnet50 --batch-size 2 --image-size 32 --mode optimizer --fp16-allreduce
run transformer-ddp-hook --model tiny-transformer --batch-size 8 --mode ddp-hook --fp16-allreduce
run transformer-ddp-gloo --model tiny-transformer --batch-size 8 --mode ddp-gloo

for bad in "--num-iters 0" "--model nosuch" "--mode nosuch"; do
  # shellcheck disable=SC2086
  output="$("$python" "$benchmark" $bad 2>&1)"
  status=$?
  [ "$status" -eq 2 ] && ok "$bad: exit status 2" || fail "$bad: exit status $status, want 2" "$output"
done
[ "$failures" -eq 0 ]
