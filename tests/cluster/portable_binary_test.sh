#!/usr/bin/env bash
# The default build runs on a CPU older than this one: under qemu's user-mode emulation of a
# Westmere (SSE4.2, no AVX), where an AVX instruction outside the run-time-dispatched loops would
# stop the program with "Illegal instruction". The unit tests of the reductions, float16
# conversions and optimisers run there, and 2-rank training runs (ring with fp16 compression,
# shm) under mpirun, every rank emulated.
#   portable_binary_test.sh BIN_DIR ARCH     (ARCH: the build's RINGTRAIN_ARCH)
# Exit 77 (skipped) for a build with -march set (native builds are for their own CPU only) and
# where qemu-x86_64 (Debian: qemu-user) is missing.
set -uo pipefail
bin="${1:?usage: portable_binary_test.sh BIN_DIR ARCH}"
arch="${2:-}"
if [ -n "$arch" ]; then
  echo "SKIP: this build targets -march=$arch; the check is for the default, portable build"
  exit 77
fi
if ! command -v qemu-x86_64 >/dev/null 2>&1; then
  echo "SKIP: qemu-x86_64 not found (apt-get install qemu-user)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
emulate=(qemu-x86_64 -cpu Westmere)
# OpenBLAS's kernels for the emulated processor, whatever the caller's environment names for its
# own: a machine that sets OPENBLAS_CORETYPE=Haswell would otherwise send the emulated ranks into
# AVX2 kernels, and they die with SIGILL (status 132). Nehalem is OpenBLAS's name for Westmere.
export OPENBLAS_CORETYPE=Nehalem
unset OPENBLAS_L2_SIZE
# shellcheck source=../support/checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/checks.sh"
# runs NAME COMMAND...: ok when COMMAND exits 0, else fail with its output.
runs() {
  local name="$1" output
  shift
  if output="$("$@" 2>&1)"; then ok "$name"; else fail "$name: status $?" "$output"; fi
}
runs "collectives unit tests on a Westmere" timeout 300 "${emulate[@]}" "$bin/collectives_unit_tests"
runs "trainer unit tests on a Westmere" timeout 300 "${emulate[@]}" "$bin/trainer_unit_tests"
# qemu has no process_vm_readv: Open MPI's shared-memory transport copies through its buffers.
for case in "ring --compression fp16" "shm"; do
  read -ra options <<<"$case"
  output="$(timeout 300 mpirun -np 2 --oversubscribe --mca btl_vader_single_copy_mechanism none \
    "${emulate[@]}" "$bin/ringtrain" train --synthetic --hidden 32 --batch-size 16 --steps 20 \
    --log-every 10 --backend "${options[@]}" 2>&1)"
  status=$?
  if [ "$status" -eq 0 ] && grep -q "done: 20 steps.*replicas identical" <<<"$output"; then
    ok "2 ranks train on emulated Westmeres (--backend $case): $(grep -o 'final accuracy [0-9.]*' <<<"$output")"
  else
    fail "2 ranks on emulated Westmeres (--backend $case): status $status" "$output"
  fi
done
[ "$failures" -eq 0 ]
