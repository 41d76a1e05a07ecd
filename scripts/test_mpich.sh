#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# The MPI tests under MPICH (Debian's mpich, ch4 device, Hydra's mpiexec), beside Open MPI: installs
# mpich and libmpich-dev if missing, configures a build folder of its own against MPICH's compiler
# wrappers and launcher (the system's default mpicxx/mpirun stay Open MPI's), builds only the
# programs those tests run, and runs them under mpiexec.mpich. Exits non-zero if anything failed.
#   scripts/test_mpich.sh           the collectives, engine and trainer MPI tests (1-4 ranks) and
#                                   their failure tests (a failing call or rank ends the job, bad
#                                   input and unusable checkpoints are refused on every rank)
#   scripts/test_mpich.sh -E regex  extra arguments go to ctest (the subset is its own -R)
# --ci, CI's form (a few minutes): the collectives' MPI tests at 2 ranks, one case per backend for
# float32 and float16 sums, broadcast, allgather, barrier, a caught mismatch, the node topology;
# and a failing MPI call ending the job.
# RINGTRAIN_MPICH_BUILD_DIR chooses the build folder (default: build-mpich/ in the repository).
set -euo pipefail
# shellcheck source=lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/args.sh"
root="$ringtrain_root"

ringtrain_flag --quick quick "only the collectives' MPI tests, at 2 and 3 ranks"
ringtrain_flag --ci ci "CI's form (above; wins over --quick)"
ringtrain_rest ctest_args "any other argument goes to ctest" any
ringtrain_parse_args "$@"
form=whole
[ "$quick" -eq 0 ] || form=quick
[ "$ci" -eq 0 ] || form=ci

# What each form builds and runs. The failure tests check that a failing MPI call, a too-low
# thread level, bad input and a rank failing mid-step end the whole job under Hydra too.
if [ "$form" = ci ]; then
  targets=(collectives_mpi_tests mpi_failure_probe)
  tests='^collectives_mpi_tests\.np2$|^mpi_failed_call'
  export GTEST_FILTER='MpiEnvironmentTest.*:HierarchicalTopology.*:Backends/AllreduceTest.*/*_float32_sum:'
  GTEST_FILTER+='Backends/AllreduceTest.*/*_float16_sum:Backends/BroadcastAllgatherTest.*:'
  GTEST_FILTER+='RingBackends/MismatchTest.DifferentCountsStopEveryRankNamingBothRanksAndCounts/*'
elif [ "$form" = quick ]; then
  targets=(collectives_mpi_tests)
  tests='^collectives_mpi_tests\.np[23]$'
else
  targets=(collectives_mpi_tests mpi_failure_probe engine_mpi_tests trainer_mpi_tests ringtrain
           idx_to_hdf5)
  tests='^(collectives_mpi_tests|engine_mpi_tests|trainer_mpi_tests(_mnist)?)\.np[0-9]$'
  tests+='|^mpi_(failed_call|thread_level)'
  tests+='|^trainer_(bad_input|engine_failures|failure_matrix|hdf5_data)$|^resilience_refuses_'
fi

ringtrain_install_packages "${RINGTRAIN_PACKAGES[@]}" mpich libmpich-dev
build_dir="${RINGTRAIN_MPICH_BUILD_DIR:-$root/build-mpich}"
mkdir -p "$build_dir"
ringtrain_configure "$build_dir" -DRINGTRAIN_WERROR=ON -DRINGTRAIN_CUDA=OFF \
  -DMPI_C_COMPILER=/usr/bin/mpicc.mpich -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich \
  -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich
if ! grep -q '^MPI_CXX_HEADER_DIR:PATH=.*/mpich$' "$build_dir/CMakeCache.txt"; then
  ringtrain_say "error: $build_dir did not pick up MPICH's headers (see $build_dir.configure.log)"
  exit 1
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
if [ "$form" = whole ]; then
  RINGTRAIN_BUILD_DIR="$build_dir" "$root/data/fetch_mnist.sh" "$root/data/mnist" ||
    ringtrain_say "MNIST is not available: the MNIST accuracy and HDF5 tests will be skipped"
fi
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -R "$tests" "${ctest_args[@]}"
