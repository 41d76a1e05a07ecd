#!/usr/bin/env bash
# `ringtrain train --data FOLDER` with train.h5/test.h5 trains exactly as on the IDX files they
# were converted from: 2 ranks, the same final parameters (fingerprint) and accuracy, for the
# contiguous layout and for deflated chunks. Exit 77 (skipped) without the MNIST sample.
#   hdf5_data_test.sh RINGTRAIN MNIST_DIR MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
mnist="$2"
shift 2
mpirun=("$@")
idx_to_hdf5="$(dirname "$ringtrain")/idx_to_hdf5"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -e "$mnist/train-images-idx3-ubyte" ] && [ ! -e "$mnist/train-images-idx3-ubyte.gz" ]; then
  echo "SKIPPED: no MNIST sample in $mnist (data/fetch_mnist.sh fetches it)"
  exit 77
fi
failures=0
# run NAME DATA: 2 ranks, 40 steps; prints "fingerprint accuracy" of the run.
run() {
  "${mpirun[@]}" -np 2 "$ringtrain" train --data "$2" --steps 40 --log-every 0 >"$work/$1.log" 2>&1 ||
    { echo "FAIL $1: exit status $?"; sed 's/^/     | /' "$work/$1.log" | tail -20; return 1; }
  echo "$(grep -o 'fingerprint [0-9a-f]*' "$work/$1.log") $(grep -o 'final accuracy [0-9.]*' "$work/$1.log")"
}

reference="$(run idx "$mnist")" || exit 1
echo "IDX:                   $reference"
for compress in 0 4; do
  folder="$work/h5-$compress"
  if ! "$idx_to_hdf5" --mnist "$mnist" "$folder" --compress "$compress" >/dev/null; then
    echo "FAIL idx_to_hdf5 --mnist $mnist $folder --compress $compress"
    failures=$((failures + 1))
    continue
  fi
  result="$(run "h5-$compress" "$folder")" || { failures=$((failures + 1)); continue; }
  if ! grep -q "data: HDF5 $folder/train.h5" "$work/h5-$compress.log"; then
    echo "FAIL --compress $compress: the run did not read $folder/train.h5"
    failures=$((failures + 1))
  elif [ "$result" != "$reference" ] || [ -z "${result// /}" ]; then
    echo "FAIL HDF5 (--compress $compress): '$result', IDX: '$reference'"
    failures=$((failures + 1))
  else
    echo "HDF5 (--compress $compress): $result"
  fi
done
[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "HDF5 datasets train exactly as their IDX source"
