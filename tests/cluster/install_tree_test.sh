#!/usr/bin/env bash
# `cmake --install` into a temporary prefix: the programs, the launch scripts (the MPIJob
# launcher's entrypoint, run_hosts.sh, slurm_train.sbatch) and their SIGTERM forwarder in
# PREFIX/bin, the data scripts and what they source and the gradient profiles in
# PREFIX/share/ringtrain; the installed programs run, and the installed scripts find the programs
# and helpers in PREFIX/bin, not in the checkout: run_hosts.sh's dry run, and slurm_train.sbatch
# under Slurm stand-ins stopping for the time limit (exit 143 through the forwarder, requeued).
#   install_tree_test.sh BUILD_DIR
set -uo pipefail
build="${1:?usage: install_tree_test.sh BUILD_DIR}"
prefix="$(mktemp -d)"
work="$(mktemp -d)"
trap 'rm -rf "$prefix" "$work"' EXIT
# shellcheck source=../support/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/checks.sh"

if ! output="$(cmake --install "$build" --prefix "$prefix" 2>&1)"; then
  echo "$output"
  fail "cmake --install $build --prefix $prefix"
  exit 1
fi
for program in ringtrain allreduce_perf model_step_perf hdf5_read_perf mnist_json_to_idx idx_to_hdf5 \
  gpt2_tokenize launcher-entrypoint.sh forward_sigterm.sh run_hosts.sh slurm_train.sbatch; do
  [ -x "$prefix/bin/$program" ] || fail "no executable $prefix/bin/$program"
done
for file in data/fetch_mnist.sh data/fetch_gpt2_vocab.sh data/prepare_fortunes.sh scripts/lib/common.sh \
  scripts/lib/fetch.sh scripts/lib/args.sh; do
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

# run_hosts.sh from the prefix runs the ringtrain beside it (no ringtrain on PATH, no checkout).
output="$(env PATH=/usr/bin:/bin "$prefix/bin/run_hosts.sh" --hosts localhost:2 --dry-run 2>&1)"
check "installed run_hosts.sh --dry-run starts PREFIX/bin/ringtrain" "$output" \
  "mpirun -np 2 --hostfile" "$prefix/bin/ringtrain train --expect-world-size 2"

# slurm_train.sbatch as Slurm runs it: a copy in a spool folder, PREFIX/bin on PATH, submitted from
# a folder that is no checkout. The srun stand-in prints rank 0's SIGTERM stop line and exits 1, as
# a launcher does after a time-limit stop; the forwarder turns that into 143, which requeues.
mkdir -p "$work/spool" "$work/fake-slurm" "$work/submit"
cp "$prefix/bin/slurm_train.sbatch" "$work/spool/slurm_script"
# shellcheck disable=SC2016  # $* belongs to the stand-ins
printf '#!/bin/sh\necho "srun $*" >>"%s/calls"\necho "stopped by SIGTERM after step 7 of 100; exit status 143"\nexit 1\n' \
  "$work" >"$work/fake-slurm/srun"
# shellcheck disable=SC2016
printf '#!/bin/sh\necho "scontrol $*" >>"%s/calls"\n' "$work" >"$work/fake-slurm/scontrol"
chmod +x "$work/fake-slurm/srun" "$work/fake-slurm/scontrol"
fake_job=(PATH="$work/fake-slurm:$prefix/bin:/usr/bin:/bin" SLURM_JOB_ID=4242 SLURM_NTASKS=2
  SLURM_JOB_NUM_NODES=1 SLURM_SUBMIT_DIR="$work/submit" RINGTRAIN_WORKDIR="$work/runs")
output="$(cd "$work/submit" && env -u RINGTRAIN_BIN -u RINGTRAIN_FORWARD_SIGTERM "${fake_job[@]}" \
  bash "$work/spool/slurm_script" --synthetic 2>&1)"
status=$?
calls="$(cat "$work/calls" 2>/dev/null)"
if [ "$status" -eq 0 ] && grep -q "^srun .* $prefix/bin/ringtrain train" <<<"$calls" &&
  grep -qx "scontrol requeue 4242" <<<"$calls"; then
  ok "installed slurm_train.sbatch: a time-limit stop (launcher status 1) becomes 143 and is requeued"
else
  fail "installed slurm_train.sbatch time-limit stop: status $status, calls: $calls" "$output"
fi
rm -f "$work/calls"
output="$(cd "$work/submit" && env -u RINGTRAIN_BIN -u RINGTRAIN_FORWARD_SIGTERM "${fake_job[@]}" \
  RINGTRAIN_REQUEUE=0 bash "$work/spool/slurm_script" --synthetic 2>&1)"
status=$?
if [ "$status" -eq 143 ] && ! grep -q scontrol "$work/calls"; then
  ok "installed slurm_train.sbatch with RINGTRAIN_REQUEUE=0 exits 143"
else
  fail "installed slurm_train.sbatch RINGTRAIN_REQUEUE=0: status $status" "$output"
fi
[ "$failures" -eq 0 ]
