#!/usr/bin/env bash
# scripts/mpirun/train.sh, the README's main job, end to end as the README runs it: the MLP on the
# MNIST sample, 2 ranks, its default 15 epochs, in the test build. Checks what the README promises
# it prints: the test accuracy after epochs, and a summary with the final accuracy (at least 0.94;
# 0.9556 in docs/performance.md) and "replicas identical"; and that it exits 0. Skipped (77)
# without the MNIST sample in data/mnist (scripts/test.sh fetches it there, as train.sh does).
# Usage: main_job_test.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="$1"
data="$root/data/mnist"
if [ ! -f "$data/train-images-idx3-ubyte" ] || [ ! -f "$data/t10k-labels-idx1-ubyte" ]; then
  echo "SKIP: no MNIST sample in data/mnist (data/fetch_mnist.sh fetches it)"
  exit 77
fi
# shellcheck source=tests/support/checks.sh
source "$root/tests/support/checks.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

status=0
(cd "$work" && env -u RINGTRAIN_RANKS -u MPIRUN_ARGS RINGTRAIN_BUILD_DIR="$build_dir" \
  RINGTRAIN_DATA="$data" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
  "$root/scripts/mpirun/train.sh" --checkpoint-dir "$work/checkpoints") </dev/null >"$work/out" 2>&1 ||
  status=$?
if [ "$status" -ne 0 ]; then fail "the main job exited with status $status"; fi
out="$work/out"
expect_lines "mlp on 2 ranks" "$out" '\[rank 0/2 [^]]*\] training mlp \(669706 parameters\) on 2 rank\(s\)'
expect_lines "accuracy after every epoch" "$out" '\[rank 0/2 [^]]*\] Accuracy at step [0-9]+: 0\.[0-9]+ .*epoch' 15
expect_lines "a summary, replicas identical" "$out" 'done: [0-9]+ steps .* final accuracy 0\.[0-9]+; replicas identical'
final="$(grep -oE 'final accuracy 0\.[0-9]+' "$work/out" | grep -oE '0\.[0-9]+' || echo 0)"
least=0.94
if python3 -c "import sys; sys.exit(0 if float('$final') >= $least else 1)"; then
  ok "final accuracy $final (>= $least)"
else
  fail "final accuracy $final, below $least"
fi
if [ "$failures" -ne 0 ]; then
  cat "$work/out"
  exit 1
fi
