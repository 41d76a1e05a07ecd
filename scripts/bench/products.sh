#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# The models' float32 matrix products on one core (issue 45): product_perf times every product a
# training step of the GPT-2 124M, GPT-mini and the CNN makes, through models::product() (the
# layers' path) and through cblas_sgemm of the linked BLAS, beside the core's FMA peak in the
# widest vectors the CPU has (and AVX2's, where that is AVX-512: a core that splits 512-bit FMAs in
# two gains nothing from them), all in the same run, rounds interleaved across the shapes. One
# thread, bound to one core (mpirun --bind-to core). Prints product_perf's table (GFLOP/s, median
# and range over the rounds, and the share of the peak; per model a `step` row weighing each
# shape by how often a step multiplies it); --json writes its JSON lines. OpenBLAS runs with
# OPENBLAS_NUM_THREADS=1 and whatever OPENBLAS_CORETYPE the caller set (printed). --peers adds
# BLIS's and oneDNN's float32 GEMM on the same operands (installed here from Debian where missing;
# product_perf loads them at run time), the libraries the issue weighed against OpenBLAS.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
ringtrain_opt --build build "$root/build" "the build (product_perf built first if missing)"
ringtrain_opt --models models gpt2-124m,gpt-mini,cnn "models, comma-separated"
ringtrain_opt --rounds rounds 3 "rounds"
ringtrain_opt --seconds seconds 0.3 "least seconds per figure"
ringtrain_opt --peers peers "" "other libraries, comma-separated: blis, onednn"
ringtrain_opt --json json "" "the rows as JSON lines"
ringtrain_parse_args "$@"
ringtrain_need_count --rounds "$rounds"
ringtrain_allow_mpirun_as_root
[ -x "$build/bin/product_perf" ] || cmake --build "$build" --target product_perf >&2
extra=()
[ -z "$json" ] || extra+=(--json "$json")
if [ -n "$peers" ]; then
  packages=()
  [[ ",$peers," == *,blis,* ]] && packages+=(libblis4-serial)
  [[ ",$peers," == *,onednn,* ]] && packages+=(libdnnl2)
  ringtrain_install_packages "${packages[@]}"
  extra+=(--peers "$peers")
fi
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}; $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1 mpirun -np 1 --bind-to core \
  -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x BLIS_NUM_THREADS "$build/bin/product_perf" \
  --models "$models" --repeats "$rounds" --seconds "$seconds" "${extra[@]}"
