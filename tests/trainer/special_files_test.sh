#!/usr/bin/env bash
# A FIFO (or any path that is no regular file) where ringtrain expects a file: open() of a FIFO
# waits for a writer forever, so each reader must refuse it before opening it. On 2 ranks, every
# rank exits with status 2 within seconds, and the job prints one line naming the file: an MNIST
# IDX file, an HDF5 train.h5, a token file, a checkpoint met by --resume auto, a --resume FILE, a
# --tuning-file, an --init-from file; a FIFO `latest` beside a good checkpoint is passed over.
# Without MPI: `ringtrain check` and `ringtrain export` of a FIFO end with status 2 too. The
# MPI cases run 3 at a time (tests/support/parallel_cases.sh): most of their time is mpirun's.
#   special_files_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
shift
mpirun=("$@")
work="$(mktemp -d)"
# shellcheck source=tests/support/checks.sh
source "$(dirname "$0")/../support/checks.sh"
# shellcheck source=tests/support/tagged_ranks.sh
source "$(dirname "$0")/../support/tagged_ranks.sh"
export RINGTRAIN_TEST_TAG="special-files-$$"
# A hung rank would hold its FIFO open forever: the test's own are killed on the way out.
trap 'kill_own_ranks; rm -rf "$work"' EXIT
# shellcheck source=tests/support/parallel_cases.sh
source "$(dirname "$0")/../support/parallel_cases.sh"

be32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
# mnist DIR: a small, valid MNIST folder (64 training and 16 test images of 28x28).
mnist() {
  mkdir -p "$1"
  local set count
  for set in train:64 t10k:16; do
    count="${set#*:}"
    printf "$(be32 2051)$(be32 "$count")$(be32 28)$(be32 28)" >"$1/${set%:*}-images-idx3-ubyte"
    head -c $((count * 784)) /dev/zero >>"$1/${set%:*}-images-idx3-ubyte"
    printf "$(be32 2049)$(be32 "$count")" >"$1/${set%:*}-labels-idx1-ubyte"
    head -c "$count" /dev/zero >>"$1/${set%:*}-labels-idx1-ubyte"
  done
}

# refused NAME PATTERN ARGS...: `ringtrain train ARGS` on 2 ranks; every rank exits 2 within 30 s
# and PATTERN (fixed text) is printed once, on an error line.
refused() {
  local name="$1" pattern="$2" start=$SECONDS output exits count
  shift 2
  # shellcheck disable=SC2016  # expanded by each rank's shell
  output="$(timeout 60 "${mpirun[@]}" -np 2 bash -c \
    '"$0" train --log-every 0 "$@"; echo "rank exit $?"' "$ringtrain" "$@" 2>&1)"
  exits="$(grep -c '^rank exit 2$' <<<"$output")"
  count="$(grep 'error: ' <<<"$output" | grep -cF -- "$pattern")"
  if [ "$exits" -eq 2 ] && [ "$count" -eq 1 ] && [ $((SECONDS - start)) -lt 30 ]; then
    ok "$name: $(grep 'error: ' <<<"$output" | grep -m1 -F -- "$pattern")"
  else
    fail "$name: $exits of 2 ranks exited 2, the line seen $count times (want 1), $((SECONDS - start)) s" "$output"
  fi
}

good="$work/good"
mnist "$good"
# `latest` is only a hint: a FIFO of that name is passed over, and the good checkpoint resumed
# (written first by a run on the valid folder).
fifo_latest() {
  local checkpoint="$work/ckpt/ckpt-00000002.h5" start output status
  "${mpirun[@]}" -np 2 "$ringtrain" train --data "$good" --steps 2 --log-every 0 \
    --checkpoint-dir "$work/ckpt" >/dev/null 2>&1 || fail "the valid folder does not train"
  [ -f "$checkpoint" ] || { fail "no checkpoint $checkpoint"; return; }
  mkdir -p "$work/fifo-latest"
  cp "$checkpoint" "$work/fifo-latest/"
  mkfifo "$work/fifo-latest/latest"
  start=$SECONDS
  output="$(timeout 60 "${mpirun[@]}" -np 2 "$ringtrain" train --data "$good" --steps 3 \
    --log-every 0 --checkpoint-dir "$work/fifo-latest" --resume auto 2>&1)"
  status=$?
  if [ "$status" -eq 0 ] && [ $((SECONDS - start)) -lt 30 ]; then
    check "a FIFO latest beside a good checkpoint" "$output" "resuming from $work/fifo-latest/ckpt-00000002.h5"
  else
    fail "a FIFO latest beside a good checkpoint: status $status, $((SECONDS - start)) s" "$output"
  fi
}
in_parallel fifo_latest

# ---- Data files ------------------------------------------------------------------------------
mnist "$work/idx"
rm "$work/idx/train-images-idx3-ubyte"
mkfifo "$work/idx/train-images-idx3-ubyte"
in_parallel refused "FIFO as an IDX file" \
  "$work/idx/train-images-idx3-ubyte: is a FIFO (named pipe), not a regular file" --data "$work/idx"

mkdir -p "$work/h5"
mkfifo "$work/h5/train.h5"
: >"$work/h5/test.h5"
in_parallel refused "FIFO as train.h5" "$work/h5/train.h5: is a FIFO (named pipe), not a regular file" \
  --data "$work/h5"

mkdir -p "$work/tokens"
mkfifo "$work/tokens/x_train.bin"
: >"$work/tokens/x_val.bin"
in_parallel refused "FIFO as a token file" "$work/tokens/x_train.bin: is a FIFO (named pipe), not a regular file" \
  --model gpt --layers 1 --heads 2 --width 16 --context 16 --vocab 256 --data "$work/tokens"

# ---- Checkpoints -----------------------------------------------------------------------------
mkdir -p "$work/fifo-ckpt"
mkfifo "$work/fifo-ckpt/ckpt-00000005.h5"
in_parallel refused "FIFO checkpoint met by --resume auto" \
  "$work/fifo-ckpt/ckpt-00000005.h5: is a FIFO (named pipe), not a regular file" \
  --data "$good" --checkpoint-dir "$work/fifo-ckpt" --resume auto
in_parallel refused "FIFO as --resume FILE" \
  "$work/fifo-ckpt/ckpt-00000005.h5: is a FIFO (named pipe), not a regular file" \
  --data "$good" --resume "$work/fifo-ckpt/ckpt-00000005.h5"

start=$SECONDS
output="$(timeout 30 "$ringtrain" check checkpoint "$work/fifo-ckpt/ckpt-00000005.h5" 2>&1)"
status=$?
if [ "$status" -eq 2 ]; then
  check "ringtrain check of a FIFO" "$output" "is a FIFO (named pipe), not a regular file"
else
  fail "ringtrain check of a FIFO: status $status (want 2), $((SECONDS - start)) s" "$output"
fi
output="$(timeout 30 "$ringtrain" export "$work/fifo-ckpt/ckpt-00000005.h5" "$work/out.st" 2>&1)"
status=$?
if [ "$status" -eq 2 ]; then
  check "ringtrain export of a FIFO" "$output" "is a FIFO (named pipe), not a regular file"
else
  fail "ringtrain export of a FIFO: status $status (want 2)" "$output"
fi

# ---- Tuning table and weights ----------------------------------------------------------------
mkfifo "$work/tuning.json"
in_parallel refused "FIFO as --tuning-file" \
  "tuning file $work/tuning.json: is a FIFO (named pipe), not a regular file" \
  --data "$good" --steps 1 --backend tuned --tuning-file "$work/tuning.json"
mkfifo "$work/weights.st"
in_parallel refused "FIFO as --init-from" "$work/weights.st: is a FIFO (named pipe), not a regular file" \
  --data "$good" --steps 1 --init-from "$work/weights.st"
parallel_done

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
