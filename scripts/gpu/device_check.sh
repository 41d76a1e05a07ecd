#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# The GPU checks of docs/gpu.md in one command, for a machine with an NVIDIA GPU, CUDA at
# /usr/local/cuda, NCCL, Open MPI and the Debian/Ubuntu -dev packages of scripts/lib/common.sh.
#
#   scripts/gpu/device_check.sh [--out DIR] [--build DIR] [--packages DIR] [STEP ...]
#
# STEP: build (configure + build with the GPU path ON), gpu-tests (ctest -L gpu), share-refused
# (two ranks on one GPU must stop with a clear message), all-tests (the whole suite), bench
# (allreduce_perf on device buffers, ringtrain train --device cuda, the PyTorch reference),
# profile (ncu's kernel times of a cnn step at batch 1024, largest first: ncu_top_kernels.py).
# Default: build gpu-tests share-refused. Logs go to --out (default: ./device-out, or $OUT).
set -uo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
cd "$ringtrain_root" || exit 2
ringtrain_opt --out out "${OUT:-$PWD/device-out}" "the logs and summary.txt"
ringtrain_opt --build build build-device "the build folder"
ringtrain_opt --packages packages "" "first unpack the .debs of this folder (scripts/gpu/pack_packages.sh)"
ringtrain_opt --werror werror ON "ON or OFF: warnings as errors (a newer compiler there may warn anew)"
ringtrain_rest steps "the steps (above)" words
ringtrain_parse_args "$@"
[[ $werror == ON || $werror == OFF ]] || { echo "device_check.sh: --werror '$werror': expected ON or OFF" >&2; exit 2; }
[[ ${#steps[@]} -gt 0 ]] || steps=(build gpu-tests share-refused)
for step in "${steps[@]}"; do  # every step known before the first one runs
  case $step in
    build | gpu-tests | share-refused | all-tests | bench | profile) ;;
    *) echo "device_check.sh: unknown step '$step' (build, gpu-tests, share-refused, all-tests, bench, profile)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc)
status=0
note() { printf '== %s\n' "$*" | tee -a "$out/summary.txt"; }

for step in "${steps[@]}"; do
  case $step in
    build)
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
      start=$SECONDS
      extra=()
      if [[ -n $packages ]]; then
        scripts/gpu/unpack_packages.sh "$packages" >"$out/packages.log" 2>&1
        note "$(grep 'files added' "$out/packages.log")"
        # The image's newer Boost package asks for program_options of its own version.
        if compgen -G "$packages/libboost-program-options1.74-dev_*" >/dev/null; then
          extra+=(-DBoost_DIR=/usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0)
        fi
      fi
      # cuDNN: the toolkit's, else the pip wheel's beside the image's PyTorch (its libraries are
      # found at run time through LD_LIBRARY_PATH, exported for the steps after this one).
      if [[ ! -e /usr/local/cuda/include/cudnn_version.h ]]; then
        wheel=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])' 2>/dev/null)
        if [[ -n $wheel && -e $wheel/include/cudnn_version.h ]]; then
          extra+=(-DCUDNN_ROOT="$wheel")
          export LD_LIBRARY_PATH=$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
          note "cuDNN from $wheel"
        fi
      fi
      # The Python package: for the python3 on PATH (there: the one holding PyTorch) and its
      # pip pybind11, where Debian's python3-dev and pybind11-dev are not installed.
      if pybind=$(python3 -m pybind11 --cmakedir 2>/dev/null); then
        extra+=(-DPython3_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$pybind")
      fi
      if ! cmake -S . -B "$build" -G Ninja -DRINGTRAIN_CUDA=ON -DRINGTRAIN_WERROR="$werror" \
            -DRINGTRAIN_CUDA_ARCHITECTURES="${RINGTRAIN_CUDA_ARCHITECTURES:-native}" "${extra[@]}" \
            >"$out/configure.log" 2>&1; then
        tail -30 "$out/configure.log"; note "configure FAILED"; exit 1
      fi
      if ! cmake --build "$build" -j "$jobs" >"$out/build.log" 2>&1; then
        grep -E "error|Error" "$out/build.log" | head -40; note "build FAILED"; exit 1
      fi
      note "build ok in $((SECONDS - start)) s, $(grep -c 'warning:' "$out/build.log") warning lines; $(grep -m1 'GPU convolutions' "$out/configure.log" | sed 's/^-- *//'); $(grep -m1 'Python module' "$out/configure.log" | sed 's/^-- *//')"
      ;;
    gpu-tests)
      ctest --test-dir "$build" -L gpu --output-on-failure >"$out/ctest_gpu.log" 2>&1 || status=1
      tail -15 "$out/ctest_gpu.log"; note "gpu tests: $(grep -E 'tests passed|tests failed' "$out/ctest_gpu.log")"
      ;;
    share-refused)
      # More ranks than GPUs: the nccl backend must end non-zero, saying which local ranks would
      # share which GPU (NCCL itself would fail or hang), and ringtrain train --device cuda must
      # refuse before training, naming the option.
      count=$(nvidia-smi -L | grep -c '^GPU')
      timeout 120 mpirun -np $((count + 1)) --oversubscribe "$build/bin/allreduce_perf" \
        --device cuda --backends nccl -b 1M -e 1M >"$out/share_refused.log" 2>&1
      rc=$?
      if grep -m1 -E "would share GPU" "$out/share_refused.log" && [[ $rc -ne 0 ]]; then
        note "share-refused (allreduce_perf) ok (exit $rc)"
      else
        note "share-refused (allreduce_perf) FAILED (exit $rc)"; tail -20 "$out/share_refused.log"; status=1
      fi
      timeout 120 mpirun -np $((count + 1)) --oversubscribe "$build/bin/ringtrain" train \
        --device cuda --synthetic --steps 5 >"$out/share_refused_train.log" 2>&1
      rc=$?
      if grep -m1 -E "\-\-device cuda: .*GPU" "$out/share_refused_train.log" && [[ $rc -eq 2 ]]; then
        note "share-refused (train) ok (exit $rc)"
      else
        note "share-refused (train) FAILED (exit $rc)"; tail -20 "$out/share_refused_train.log"; status=1
      fi
      ;;
    all-tests)
      ctest --test-dir "$build" -j "$((jobs / 2))" --output-on-failure >"$out/ctest_all.log" 2>&1 || status=1
      grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Not Run|Skipped" "$out/ctest_all.log" | tail -20
      note "all tests: $(grep -E 'tests passed|tests failed' "$out/ctest_all.log")"
      ;;
    profile)
      # Kernel times only (one replay pass each), clocks left alone; the first 600 launches
      # (cuDNN's Find and the paths' timing included: the averages are per kernel and grid).
      timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --launch-count 600 \
        --print-summary per-kernel "$build/bin/model_step_perf" --device cuda --models cnn \
        --batch 1024 --gemm 0 --repeats 1 --seconds 0.2 >"$out/ncu.txt" 2>&1
      if python3 scripts/gpu/ncu_top_kernels.py "$out/ncu.txt" --json "$out/ncu_top_kernels.json" \
          >"$out/ncu_top_kernels.txt"; then
        head -25 "$out/ncu_top_kernels.txt"; note "profile: ok"
      else
        tail -10 "$out/ncu.txt"; note "profile FAILED"; status=1
      fi
      ;;
    bench)
      if [[ -x scripts/gpu/device_bench.sh ]]; then
        scripts/gpu/device_bench.sh "$build" "$out" || status=1
      else
        note "no scripts/gpu/device_bench.sh yet"
      fi
      ;;
  esac
done
cat "$out/summary.txt"
exit $status
