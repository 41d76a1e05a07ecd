#!/usr/bin/env bash
# `cmake --install` into a temporary prefix: the programs, the launcher's entrypoint and its
# SIGTERM forwarder in PREFIX/bin, the data scripts and what they source and the gradient profiles
# in PREFIX/share/ringtrain;
# the installed programs run, and the installed scripts find the programs in PREFIX/bin.
#   install_tree_test.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: install_tree_test.sh BUILD_DIR}"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
# shellcheck source=../support/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/checks.sh"

if ! output="$(cmake --install "$build" --prefix "$prefix" 2>&1)"; then
  echo "$output"
  fail "cmake --install $build --prefix $prefix"
  exit 1
fi
for program in ringtrain allreduce_perf model_step_perf hdf5_read_perf mnist_json_to_idx idx_to_hdf5 \
  gpt2_tokenize launcher-entrypoint.sh forward_sigterm.sh; do
  [ -x "$prefix/bin/$program" ] || fail "no executable $prefix/bin/$program"
done
for file in data/fetch_mnist.sh data/fetch_gpt2_vocab.sh data/prepare_fortunes.sh scripts/lib/common.sh \
  scripts/lib/fetch.sh; do
  [ -f "$prefix/share/ringtrain/$file" ] || fail "no $prefix/share/ringtrain/$file"
done
[ "$failures" -eq 0 ] && ok "the programs in PREFIX/bin, the data scripts in PREFIX/share/ringtrain"

if version="$("$prefix/bin/ringtrain" --version 2>&1)" && grep -q '^ringtrain [0-9]' <<<"$version"; then
  ok "the installed ringtrain runs: $version"
else
  fail "installed ringtrain --version: $version"
fi
# The installed ringtrain bench finds a profile by name in PREFIX/share/ringtrain/profiles.
if output="$("$prefix/bin/ringtrain" bench --profile resnet50 --compute-ms 0 --warmup-steps 0 \
  --chunks 1 --steps-per-chunk 1 2>&1)" && grep -q "ringtrain bench: resnet50 (161 tensors" <<<"$output"; then
  ok "the installed ringtrain bench finds its profiles"
else
  fail "installed ringtrain bench --profile resnet50: $output"
fi
# The installed scripts take PREFIX as their build folder (its bin/ holds the converters).
found="$(env -u RINGTRAIN_BUILD_DIR bash -c "source '$prefix/share/ringtrain/scripts/lib/common.sh' && ringtrain_default_build_dir")"
if [ "$found" = "$(cd "$prefix" && pwd)" ]; then
  ok "installed scripts find the programs in PREFIX/bin"
else
  fail "installed common.sh: build folder '$found', want $prefix"
fi
# The installed fetch script runs: it sources its libraries and sees a folder that has MNIST.
mkdir -p "$prefix/mnist"
touch "$prefix/mnist/"{train-images-idx3-ubyte,train-labels-idx1-ubyte,t10k-images-idx3-ubyte,t10k-labels-idx1-ubyte}
if output="$(env -u RINGTRAIN_BUILD_DIR bash "$prefix/share/ringtrain/data/fetch_mnist.sh" "$prefix/mnist" 2>&1)" &&
  grep -q "already in" <<<"$output"; then
  ok "the installed fetch_mnist.sh runs: $output"
else
  fail "installed fetch_mnist.sh: $output"
fi
[ "$failures" -eq 0 ]
