#!/usr/bin/env bash
# --device cuda against --device cpu on the MNIST sample, under mpirun with RANKS ranks: the GPU
# run reaches the CPU run's accuracy (same options, both runs here), the replicas stay identical,
# a GPU checkpoint resumes on the GPU and on the CPU, --accumulate-steps trains as the larger
# batch, and --check-finite stop names the layer.
# Exit 77 (skipped, with the reason) without the MNIST sample or without a GPU per rank.
#   gpu_train_test.sh RINGTRAIN MNIST_DIR RANKS MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
mnist="$2"
ranks="$3"
shift 3
mpirun=("$@")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

if [ ! -f "$mnist/train-images-idx3-ubyte" ] && [ ! -f "$mnist/train-images-idx3-ubyte.gz" ]; then
  echo "SKIPPED: no MNIST sample in $mnist (data/fetch_mnist.sh fetches it)"
  exit 77
fi
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
if [ "${gpus:-0}" -lt "$ranks" ]; then
  echo "SKIPPED: $ranks rank(s) need a GPU each, ${gpus:-0} visible (nvidia-smi -L)"
  exit 77
fi

# train NAME ARGS...: runs the job, keeps its output in $work/NAME.log, prints its status.
# LOG_EVERY=N: a progress line every N steps (none by default).
train() {
  local name="$1"
  shift
  timeout 600 "${mpirun[@]}" -np "$ranks" "$ringtrain" train --data "$mnist" --log-every "${LOG_EVERY:-0}" "$@" \
    >"$work/$name.log" 2>&1
  echo $?
}
accuracy() { grep -o 'final accuracy [0-9.]*' "$work/$1.log" | awk '{print $3}'; }
fail() {
  echo "FAIL $1"
  sed 's/^/     | /' "$work/$2.log" | tail -30
  failures=$((failures + 1))
}
# same_accuracy NAME FLOOR SLACK ARGS...: cpu and cuda runs of ARGS both succeed with identical
# replicas; cuda reaches FLOOR and the cpu accuracy minus SLACK.
same_accuracy() {
  local name="$1" floor="$2" slack="$3"
  shift 3
  local cpu_status gpu_status cpu gpu
  cpu_status="$(train "$name-cpu" --device cpu "$@")"
  gpu_status="$(train "$name-cuda" --device cuda "$@")"
  cpu="$(accuracy "$name-cpu")"
  gpu="$(accuracy "$name-cuda")"
  if [ "$cpu_status" -ne 0 ] || [ -z "$cpu" ]; then fail "$name: the cpu run (status $cpu_status)" "$name-cpu"; return; fi
  if [ "$gpu_status" -ne 0 ] || [ -z "$gpu" ]; then fail "$name: the cuda run (status $gpu_status)" "$name-cuda"; return; fi
  if ! grep -q "replicas identical" "$work/$name-cuda.log"; then fail "$name: cuda replicas differ" "$name-cuda"; return; fi
  if ! grep -q "^.*device cuda" "$work/$name-cuda.log"; then fail "$name: no 'device cuda' line" "$name-cuda"; return; fi
  if awk -v g="$gpu" -v c="$cpu" -v f="$floor" -v s="$slack" 'BEGIN { exit !(g >= f && g >= c - s) }'; then
    echo "ok   $name: cuda accuracy $gpu, cpu $cpu (floor $floor, slack $slack)"
  else
    fail "$name: cuda accuracy $gpu, cpu $cpu (want >= $floor and >= cpu - $slack)" "$name-cuda"
  fi
}

same_accuracy "mlp 1 epoch" 0.90 0.01 --model mlp --epochs 1 --batch-size 64
same_accuracy "cnn 300 steps" 0.90 0.02 --model cnn --steps 300 --batch-size 64

# --accumulate-steps on the device: 2 micro-batches of 32 per step train as one batch of 64 does
# (up to the summation order) and as the cpu's accumulation does. The loss of steps 31-40 shows a
# wrong weight or scale (a doubled gradient, a micro-batch left out) long before accuracy would.
last_loss() { grep -o 'loss [0-9.]*' "$work/$1.log" | tail -1 | awk '{print $2}'; }
accumulation_case() {
  local name="$1" expected_name="$2"
  shift 2
  local status loss expected
  status="$(LOG_EVERY=10 train "$name" --model mlp --steps 40 "$@")"
  loss="$(last_loss "$name")"
  expected="$(last_loss "$expected_name")"
  if [ "$status" -eq 0 ] && [ -n "$loss" ] && [ -n "$expected" ] &&
    awk -v a="$loss" -v b="$expected" 'BEGIN { d = a - b; exit !(d < 0.002 && d > -0.002) }'; then
    echo "ok   $name: loss of steps 31-40 $loss, $expected_name $expected"
  else
    fail "$name (status $status): loss of steps 31-40 ${loss:-none}, $expected_name ${expected:-none} (want within 0.002)" "$name"
  fi
}
status="$(LOG_EVERY=10 train "cuda batch 64" --device cuda --model mlp --steps 40 --batch-size 64)"
if [ "$status" -ne 0 ]; then fail "cuda batch 64 (status $status)" "cuda batch 64"; fi
accumulation_case "cuda 2 x 32 accumulated" "cuda batch 64" --device cuda --batch-size 32 --accumulate-steps 2
accumulation_case "cpu 2 x 32 accumulated" "cuda 2 x 32 accumulated" --device cpu --batch-size 32 --accumulate-steps 2

# A GPU checkpoint holds the GPU's parameters and optimiser state: it continues on the CPU
# (which writes nothing) and on the GPU.
checkpoints="$work/checkpoints"
status="$(train resume-first --device cuda --model mlp --steps 200 --checkpoint-every 100 --checkpoint-dir "$checkpoints" --optimizer adam --lr 0.001)"
if [ "$status" -ne 0 ]; then fail "checkpointing run (status $status)" resume-first; fi
status="$(train resume-cpu --device cpu --model mlp --steps 300 --resume "$checkpoints" --optimizer adam --lr 0.001)"
if [ "$status" -ne 0 ] || ! awk -v a="$(accuracy resume-cpu)" 'BEGIN { exit !(a >= 0.9) }'; then
  fail "a cuda checkpoint continued on the cpu (status $status)" resume-cpu
else
  echo "ok   a cuda checkpoint continued on the cpu: accuracy $(accuracy resume-cpu)"
fi

status="$(train resume-cuda --device cuda --model mlp --steps 300 --checkpoint-dir "$checkpoints" --resume auto --optimizer adam --lr 0.001)"
if [ "$status" -ne 0 ] || ! grep -q "resumed" "$work/resume-cuda.log" ||
  ! awk -v a="$(accuracy resume-cuda)" 'BEGIN { exit !(a >= 0.9) }'; then
  fail "resume on cuda (status $status, accuracy $(accuracy resume-cuda))" resume-cuda
else
  echo "ok   resume on cuda: accuracy $(accuracy resume-cuda)"
fi

# A NaN fed into step 5 reaches the averaged gradients on the device: stop, naming a parameter.
status="$(train nan --device cuda --model mlp --steps 20 --check-finite stop --test-nan-step 4)"
if [ "$status" -eq 3 ] && grep -q "step 5: the averaged gradient of .* holds" "$work/nan.log"; then
  echo "ok   --check-finite stop on cuda: $(grep -m1 -o 'step 5: .*' "$work/nan.log")"
else
  fail "--check-finite stop on cuda (status $status, want 3)" nan
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "cuda training matches the cpu"
