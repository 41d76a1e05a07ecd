#!/usr/bin/env bash
# Every bad input of `ringtrain train` under mpirun with 2 ranks: the job ends within the time
# limit with exit status 2, and the cause is printed once, on one line naming the option or file.
#   bad_input_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

be32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
# images FILE COUNT: an IDX uint8 image file of COUNT 28x28 images.
images() {
  printf "$(be32 2051)$(be32 "$2")$(be32 28)$(be32 28)" >"$1"
  head -c $(($2 * 784)) /dev/zero >>"$1"
}
# labels FILE COUNT [BYTE]: an IDX uint8 label file, every label BYTE (default 3).
labels() {
  printf "$(be32 2049)$(be32 "$2")" >"$1"
  for ((i = 0; i < $2; ++i)); do printf "\\x$(printf %02x "${3:-3}")"; done >>"$1"
}
# mnist DIR: a small, valid MNIST folder.
mnist() {
  mkdir -p "$1"
  images "$1/train-images-idx3-ubyte" 64
  labels "$1/train-labels-idx1-ubyte" 64
  images "$1/t10k-images-idx3-ubyte" 16
  labels "$1/t10k-labels-idx1-ubyte" 16
}

# tokens FILE [MAGIC [VERSION [COUNT [TOKENS]]]]: an llm.c token file of TOKENS (300) ids, 0 to
# 199 repeating; the header's magic, version or token count replaced where given.
tokens() {
  python3 - "$@" <<'PY'
import struct, sys
path, rest = sys.argv[1], [int(a) for a in sys.argv[2:]]
magic, version, count, n = rest + [20240520, 1, -1, 300][len(rest):]
ids = [i % 200 for i in range(n)]
header = [magic, version, n if count < 0 else count] + [0] * 253
open(path, "wb").write(struct.pack("<256i", *header) + struct.pack("<%dH" % n, *ids))
PY
}
# token_folder DIR [TRAIN-ARGS...]: DIR/x_train.bin made by `tokens DIR/x_train.bin TRAIN-ARGS`,
# and a valid DIR/x_val.bin.
token_folder() {
  mkdir -p "$1"
  tokens "$1/x_train.bin" "${@:2}"
  tokens "$1/x_val.bin"
}

# expect NAME PATTERN ARGS...: runs 2 ranks with ARGS and checks status 2, PATTERN once, time.
expect() {
  local name="$1" pattern="$2"
  shift 2
  expect_job "$name" "$pattern" -np 2 "$ringtrain" train --log-every 0 "$@"
}

# expect_job NAME PATTERN MPIRUN-ARGS...: the same for any job (MPMD: one --data per rank). The
# cases run 4 at a time (tests/support/parallel_cases.sh: each mostly waits on mpirun's teardown
# after a non-zero exit); their reports are printed in order at the end. Every case has its own
# files, made before it starts.
parallel_cases=4
# shellcheck source=tests/support/parallel_cases.sh
source "$(dirname "$0")/../support/parallel_cases.sh"
expect_job() { in_parallel run_case "$@"; }

# run_case NAME PATTERN MPIRUN-ARGS...: one case; "ok" or "FAIL" first on its report.
run_case() {
  local name="$1" pattern="$2"
  shift 2
  local start=$SECONDS output status
  output="$(timeout 60 "${mpirun[@]}" "$@" 2>&1)"
  status=$?
  local elapsed=$((SECONDS - start)) count
  count="$(grep -c -E "error: .*($pattern)" <<<"$output")"
  if [ "$status" -eq 2 ] && [ "$count" -eq 1 ] && [ "$elapsed" -lt 30 ]; then
    echo "ok   $name: $(grep -m1 -E "error: .*($pattern)" <<<"$output")"
  else
    echo "FAIL $name: status $status (want 2), message seen $count times (want 1), ${elapsed} s"
    echo "$output" | sed 's/^/     | /'
  fi
}

good="$work/good"
mnist "$good"
# The valid folder trains: the checks below fail for the reason they name, nothing else.
if ! "${mpirun[@]}" -np 2 "$ringtrain" train --data "$good" --steps 2 --log-every 0 >/dev/null 2>&1; then
  echo "FAIL the valid folder does not train"
  failures=$((failures + 1))
fi

# The GPT's token files: a tiny model whose vocabulary (256) holds every id of the valid files.
gpt=(--model gpt --layers 1 --heads 2 --width 16 --context 16 --vocab 256)
token_folder "$work/tokens"
if ! "${mpirun[@]}" -np 2 "$ringtrain" train "${gpt[@]}" --data "$work/tokens" --steps 2 \
  --log-every 0 >/dev/null 2>&1; then
  echo "FAIL the valid token folder does not train"
  failures=$((failures + 1))
fi
token_folder "$work/magic" 12345
expect "token file: wrong magic" "magic/x_train.bin: wrong magic 12345" "${gpt[@]}" --data "$work/magic"
token_folder "$work/version" 20240520 2
expect "token file: other version" "version/x_train.bin: unsupported version 2" "${gpt[@]}" --data "$work/version"
token_folder "$work/cut" 20240520 1 400
expect "token file: truncated" "cut/x_train.bin: truncated: the header counts 400" "${gpt[@]}" --data "$work/cut"
expect "token id outside the vocabulary" "tokens/x_train.bin: token 1[0-9]{2} at position" "${gpt[@]:0:10}" --vocab 100 --data "$work/tokens"
token_folder "$work/short" 20240520 1 -1 10
expect "token file shorter than a window" "short/x_train.bin: 10 tokens, shorter than one window of context 16" "${gpt[@]}" --data "$work/short"
expect "gpt on image data" "holds no token files" "${gpt[@]}" --data "$good"

expect "batch size 0" "--batch-size must be at least 1 \(got 0\)" --data "$good" --batch-size 0
expect "accumulate steps 0" "--accumulate-steps must be at least 1 \(got 0\)" --data "$good" --accumulate-steps 0
expect "negative accumulate steps" "--accumulate-steps must be at least 1 \(got -3\)" --data "$good" --accumulate-steps -3
expect "fractional accumulate steps" "accumulate-steps.*'2.5'|'2.5'.*accumulate-steps" --data "$good" --accumulate-steps 2.5
expect "negative learning rate" "--lr must be greater than 0" --data "$good" --lr -1
expect "infinite learning rate" "--lr must be a finite number \(got inf\)" --data "$good" --lr inf
expect "infinite stall timeout" "--stall-timeout must be a finite number \(got inf\) \(0 means never\)" --data "$good" --stall-timeout inf
printf 'epochs = 1\nbatch-size = many\n' >"$work/run.cfg"
expect "bad value in the config file" "--config $work/run.cfg line 2: batch-size = many: .*'many'" --data "$good" --config "$work/run.cfg"
RINGTRAIN_BATCH_SIZE=many expect "bad value in the environment" "RINGTRAIN_BATCH_SIZE=many: .*'many'" --data "$good"
expect "model larger than memory" "--model mlp --hidden 100000,100000: .* parameters need .* GiB per rank.* but the machine has .* GiB of memory" --synthetic --hidden 100000,100000
expect "unknown model" "--model 'resnet': expected linreg, mlp, cnn, gpt, gpt-mini or gpt2-124m" --data "$good" --model resnet
expect "unparseable hidden sizes" "--hidden '512,abc': expected positive sizes" --data "$good" --hidden 512,abc
expect "unknown option" "unrecognised option '--no-such-option'|unrecognized option '--no-such-option'" --data "$good" --no-such-option 1
expect "missing data folder" "--data $work/nowhere: no such folder" --data "$work/nowhere"
expect "unknown backend" "--backend 'tcp': expected auto, mpi, ring, tuned, hierarchical, shm or nccl" --data "$good" --backend tcp
expect "wrong world size" "--expect-world-size 4 but MPI started 2 rank" --data "$good" --expect-world-size 4
expect "unknown device" "--device 'tpu': expected auto, cpu or cuda" --data "$good" --device tpu
expect "unknown log level" "--log-level 'verbose': expected error, warn, info or debug" --data "$good" --log-level verbose
expect "log file pattern with a bad placeholder" "--log-file 'train-%x.log': %x is no placeholder" --data "$good" --log-file "train-%x.log"
expect "one log file for two ranks" "--log-file '$work/train.log' names one file for 2 ranks: put %r" --data "$good" --log-file "$work/train.log"
expect "one log file for two ranks (%%r is no rank)" "--log-file '$work/train-%%r.log' names one file for 2 ranks" --data "$good" --log-file "$work/train-%%r.log"
touch "$work/a-file"
expect "log folder that cannot be made" "--log-file $work/a-file/train-[01].log: cannot create the folder" --data "$good" --log-file "$work/a-file/train-%r.log"
mkdir -p "$work/taken-1.log"
expect "log file one rank cannot open" "--log-file $work/taken-1.log: cannot open for writing: Is a directory" --data "$good" --log-file "$work/taken-%r.log"
expect "unknown prefetch" "--prefetch 'yes': expected auto, on or off" --data "$good" --prefetch yes
expect "removed shm parameters" "--shm-parameters was removed: --backend shm keeps a copy of the parameters on every rank" --data "$good" --shm-parameters auto
# --zero 1 where the all-reduce does not split in two (every backend but ring and tuned).
for backend in shm mpi hierarchical; do
  expect "zero 1 with $backend" "--zero 1 splits the ring's all-reduce in two, and --backend $backend has no such split: use --backend ring or tuned" --data "$good" --zero 1 --backend "$backend"
done
expect "zero 1 with auto taking shm" "--zero 1: --backend auto takes shm here .*: pass --backend ring" --data "$good" --zero 1
expect "zero 1 on cuda" "--zero 1 runs on the host only: use --device cpu or auto" --data "$good" --zero 1 --device cuda
expect "zero 1 with check-finite" "--check-finite stop is not available with --zero 1" --data "$good" --zero 1 --backend ring --check-finite stop
expect "zero 2" "--zero must be in \[0, 1\] \(got 2\)" --data "$good" --zero 2
expect "nccl on the cpu" "--backend nccl averages GPU buffers: it needs --device cuda" --data "$good" --device cpu --backend nccl
expect "host backend on cuda" "--backend mpi averages host buffers: with --device cuda use --backend nccl" --data "$good" --device cuda --backend mpi
expect "compression on cuda" "--compression fp16 is not supported on the GPU yet" --data "$good" --device cuda --compression fp16
expect "unknown precision" "--precision 'fp8': expected fp32 or bf16" --data "$good" --precision fp8
expect "bf16 on cuda" "--precision bf16 is for the CPU's matrix products: use --device cpu or auto" --data "$good" --device cuda --precision bf16
# --test-no-avx512-bf16: the rank acts as if its CPU lacked the instructions.
no_bf16="--precision bf16 needs a CPU with AVX512-BF16 instructions, and this job's \(on one rank at least\) has none: use --precision fp32"
expect "bf16 on a CPU without AVX512-BF16" "$no_bf16" --data "$good" --precision bf16 --test-no-avx512-bf16
bf16_rank=(-np 1 "$ringtrain" train --log-every 0 --steps 2 --data "$good" --precision bf16)
expect_job "bf16 where one rank's CPU lacks AVX512-BF16" "$no_bf16" \
  "${bf16_rank[@]}" : "${bf16_rank[@]}" --test-no-avx512-bf16
# Two ranks on a machine without two GPUs (or a build without the GPU path): refused, never a hang.
if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
  expect "cuda without a GPU per rank" "--device cuda: (this build has no GPU path|no GPU visible|2 ranks on this node but)" --data "$good" --device cuda
fi

truncated="$work/truncated"
mnist "$truncated"
head -c 5000 "$good/train-images-idx3-ubyte" >"$truncated/train-images-idx3-ubyte"
expect "truncated images" "train-images-idx3-ubyte: truncated" --data "$truncated"

empty="$work/empty"
mnist "$empty"
: >"$empty/t10k-labels-idx1-ubyte"
expect "empty labels file" "t10k-labels-idx1-ubyte: .*empty" --data "$empty"

mislabelled="$work/mislabelled"
mnist "$mislabelled"
labels "$mislabelled/train-labels-idx1-ubyte" 64 11
expect "label out of range" "train-labels-idx1-ubyte: .*11" --data "$mislabelled"

mismatch="$work/mismatch"
mnist "$mismatch"
labels "$mismatch/train-labels-idx1-ubyte" 63
expect "images and labels disagree" "64.*63|63.*64" --data "$mismatch"

missing="$work/missing"
mnist "$missing"
rm "$missing/t10k-images-idx3-ubyte"
expect "missing test images" "t10k-images-idx3-ubyte" --data "$missing"

# Ranks that read different data (same options, another --data each) are stopped at start with
# the item and both values, not left to train apart or hang until --stall-timeout.
bigger="$work/bigger"
mnist "$bigger"
images "$bigger/train-images-idx3-ubyte" 80
labels "$bigger/train-labels-idx1-ubyte" 80
rank=(-np 1 "$ringtrain" train --log-every 0 --steps 2 --data)
expect_job "ranks with other data sizes" "rank 1 has train data samples 80 but rank 0 has 64" \
  "${rank[@]}" "$good" : "${rank[@]}" "$bigger"
relabelled="$work/relabelled"
mnist "$relabelled"
labels "$relabelled/t10k-labels-idx1-ubyte" 16 4
expect_job "ranks with other data of one size" "rank 1 has test data digest [0-9a-f]+ but rank 0 has [0-9a-f]+" \
  "${rank[@]}" "$good" : "${rank[@]}" "$relabelled"

# GPT ranks that disagree on a size (one --heads each) are stopped at start, naming the option.
gpt_rank=(-np 1 "$ringtrain" train --log-every 0 --steps 2 --model gpt --layers 1 --width 16
  --context 16 --vocab 256 --data "$work/tokens")
expect_job "GPT ranks with other heads" "rank 1 has --heads 4 but rank 0 has 2" \
  "${gpt_rank[@]}" --heads 2 : "${gpt_rank[@]}" --heads 4

# HDF5 datasets (train.h5 and test.h5 in --data): written from the small MNIST folder by
# idx_to_hdf5, which sits beside ringtrain.
idx_to_hdf5="$(dirname "$ringtrain")/idx_to_hdf5"
h5="$work/h5"
if "$idx_to_hdf5" --mnist "$good" "$h5" >/dev/null; then
  lonely="$work/h5-lonely"
  mkdir -p "$lonely"
  cp "$h5/train.h5" "$lonely/"
  expect "train.h5 without test.h5" "$lonely/test.h5: not found \\($lonely/train.h5 is there" --data "$lonely"
  garbage="$work/h5-garbage"
  mkdir -p "$garbage"
  cp "$h5/test.h5" "$garbage/"
  echo "not hdf5" >"$garbage/train.h5"
  expect "train.h5 not HDF5" "$garbage/train.h5: not an HDF5 file" --data "$garbage"
  mismatched="$work/h5-mismatched"
  mkdir -p "$mismatched"
  "$idx_to_hdf5" "$good/train-images-idx3-ubyte" "$good/train-labels-idx1-ubyte" "$mismatched/train.h5" --classes 12 >/dev/null
  cp "$h5/test.h5" "$mismatched/"
  expect "train.h5 and test.h5 disagree" "$mismatched/test.h5: has 10 classes but $mismatched/train.h5 has 12" --data "$mismatched"
else
  echo "FAIL idx_to_hdf5 --mnist $good $h5"
  failures=$((failures + 1))
fi

# allreduce_perf's bad inputs are checked by tests/bench/allreduce_perf_test.sh.

parallel_done
if [ "$failures" -ne 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all bad inputs rejected"
