#!/usr/bin/env bash
# The installed Python package: `cmake --install` into a temporary prefix, then the NumPy test
# and (with python3-torch) the PyTorch exactness tests (DistributedOptimizer, the DDP hook) on 2
# ranks with only PYTHONPATH=PREFIX/lib/python3/dist-packages, from a folder outside the checkout.
#   installed_package_test.sh BUILD_DIR PYTHON MPIEXEC [MPIEXEC_FLAGS...]
set -uo pipefail
build="${1:?usage: installed_package_test.sh BUILD_DIR PYTHON MPIEXEC [FLAGS...]}"
python="${2:?}"
mpiexec="${3:?}"
shift 3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
# shellcheck source=../support/checks.sh
source "$here/../support/checks.sh"
if ! output="$(cmake --install "$build" --prefix "$prefix" 2>&1)"; then
  fail "cmake --install $build" "$output"
  exit 1
fi
export PYTHONPATH="$prefix/lib/python3/dist-packages" OMP_NUM_THREADS=1
cd "$prefix" || exit 1
for test in numpy_test.py torch_exactness_test.py torch_ddp_hook_test.py; do
  output="$("$mpiexec" -np 2 "$@" "$python" "$here/$test" 2>&1)"
  status=$?
  if [ "$status" -eq 77 ]; then
    echo "skip $test: $(grep -m1 SKIP <<<"$output")"
  # Counted with grep -o: mpirun may join two ranks' lines into one ("...ok rank 1/2: ...").
  elif [ "$status" -eq 0 ] && [ "$(grep -oE 'ok (rank [0-9]+/2:|  )' <<<"$output" | wc -l)" -ge 2 ]; then
    ok "$test on 2 ranks through the installed package"
  else
    fail "$test through the installed package (status $status)" "$output"
  fi
done
[ "$failures" -eq 0 ]
