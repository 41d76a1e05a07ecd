# Shared by the scripts: the Debian packages ringtrain needs, installing only what is missing,
# and the Open MPI settings for running as root.

# Everything needed to build ringtrain and run its tests (CUDA and NCCL are not Debian packages
# and stay optional).
RINGTRAIN_PACKAGES=(
  g++ cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev
  libeigen3-dev libopenblas-serial-dev libhdf5-dev hdf5-tools zlib1g-dev
  # the float32 convolutions' direct kernels (models/direct_convolution.h)
  libdnnl-dev
  libboost-program-options-dev libfmt-dev nlohmann-json3-dev
  # GPT-2's tokenizer (data/bpe_tokenizer.cc): its pre-tokenisation pattern needs Unicode classes
  # (\p{L}, \p{N}) and lookahead on UTF-8 text, which std::regex lacks
  libpcre2-dev
  # the GPT corpus: Debian's English fortunes (data/prepare_fortunes.sh; its test takes a sample)
  fortunes
  libprotobuf-dev protobuf-compiler
  libgtest-dev
  # the ringtrain Python module (python/): Debian's Python headers, pybind11, NumPy for its tests;
  # python3-torch (about 1 GB with its dependencies) is not here: the torch tests print SKIP
  # without it
  python3-dev pybind11-dev python3-numpy
  # fuzzing and sanitizers (libFuzzer needs clang)
  clang libclang-rt-14-dev libfuzzer-14-dev
  # the Kubernetes manifest checks (CRD schema, API types), shellcheck of the cluster scripts,
  # multi-host simulation and plots
  python3-yaml python3-jsonschema python3-kubernetes shellcheck iproute2 gnuplot-nox
  # the portable build on an emulated older CPU (tests/cluster/portable_binary_test.sh)
  qemu-user
)

# PyTorch for the Python tests and benchmarks of ringtrain.torch (tests/python,
# examples/pytorch_synthetic_benchmark.py, scripts/bench/pytorch_api.sh): about 1 GB with its
# dependencies, so not in RINGTRAIN_PACKAGES; without it those tests print SKIP.
RINGTRAIN_TORCH_PACKAGES=(python3-torch python3-torchvision)

ringtrain_say() { printf '[ringtrain] %s\n' "$*" >&2; }

# ringtrain_need_count OPTION VALUE [MIN]: exit 2 with one line unless VALUE is a whole number
# of at least MIN (default 1), written without leading zeros (bash reads 08 as octal); the
# benchmark scripts' check of their counts.
ringtrain_need_count() {
  local min="${3:-1}"
  [[ "$2" =~ ^(0|[1-9][0-9]*)$ ]] && [ "$2" -ge "$min" ] && return 0
  ringtrain_say "error: $1 '$2': expected a whole number of at least $min (no leading zeros)"
  exit 2
}

# Prints the packages of "$@" that are not installed.
ringtrain_missing_packages() {
  local package
  for package in "$@"; do
    dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q '^install ok installed$' ||
      printf '%s\n' "$package"
  done
}

# Installs the packages of "$@" that are missing; runs apt-get update only when something is.
ringtrain_install_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    ringtrain_say "not a Debian/Ubuntu system: install the equivalents of: $*"
    return 0
  fi
  local missing
  mapfile -t missing < <(ringtrain_missing_packages "$@")
  [ "${#missing[@]}" -eq 0 ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      ringtrain_say "error: missing packages (${missing[*]}) and not root; install them and rerun"
      return 1
    fi
    sudo=(sudo)
  fi
  ringtrain_say "installing: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# Installs Debian's PyTorch and torchvision where missing (minutes the first time).
ringtrain_install_torch() {
  ringtrain_install_packages "${RINGTRAIN_TORCH_PACKAGES[@]}"
}

# glibc's malloc set as PyTorch's CPU guides advise, for every run of a benchmark that compares
# with PyTorch, ringtrain's runs included (docs/performance.md): blocks come from the heap, never
# from fresh mmap'd pages (up to 4 GiB; glibc honours this through the environment, whereas
# mallopt() caps it at 32 MiB), and the heap is never trimmed. Without it glibc hands PyTorch's
# large blocks back to the kernel every step and faults them in again (~17 us a page on some
# VMs). Exported, so that mpirun passes it on; ringtrain_malloc_note says so in a table.
ringtrain_malloc_note="glibc malloc: MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 in every run"
ringtrain_fair_malloc() {
  export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736
}

# Open MPI refuses to run as root unless told twice; CI and containers run as root.
# ringtrain_gpt_shape RINGTRAIN OPTION...: the GPT's sizes as `RINGTRAIN train OPTION...
# --print-config` gives them (--model's preset, then the options) into the variables layers,
# heads, width, context and vocab; the program's error and status 2 when it refuses them.
ringtrain_gpt_shape() {
  local bin="$1" config key value
  shift
  config="$("$bin" train "$@" --print-config)" || return 2
  while read -r key _ value; do
    case "$key" in
      layers | heads | width | context | vocab) printf -v "$key" '%s' "$value" ;;
    esac
  done <<<"$config"
}

ringtrain_allow_mpirun_as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
}

# The folder whose bin/ holds ringtrain's programs: RINGTRAIN_BUILD_DIR, else the checkout's
# build/, else, for scripts installed by `cmake --install` (PREFIX/share/ringtrain/...), PREFIX.
ringtrain_default_build_dir() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  if [ -n "${RINGTRAIN_BUILD_DIR:-}" ]; then
    echo "$RINGTRAIN_BUILD_DIR"
  elif [ ! -d "$root/build" ] && [ -x "$root/../../bin/ringtrain" ]; then
    (cd "$root/../.." && pwd)
  else
    echo "$root/build"
  fi
}

# Configures $1 (Release, with the generator RINGTRAIN_GENERATOR, default Ninja) and prints the
# configuration summary; extra arguments go to cmake (a later -DCMAKE_BUILD_TYPE wins). A folder
# configured before with another generator is reconfigured from scratch (cmake refuses to switch).
ringtrain_configure() {
  local root build_dir generator="${RINGTRAIN_GENERATOR:-Ninja}"
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  build_dir="$1"
  shift
  if [ -f "$build_dir/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$generator" "$build_dir/CMakeCache.txt"; then
    rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
  fi
  cmake -S "$root" -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release "$@" >"$build_dir.configure.log" 2>&1 ||
    { cat "$build_dir.configure.log" >&2; return 1; }
  sed -n '/ringtrain [0-9.]* configuration/,/^-- $/p' "$build_dir.configure.log" >&2
}

# Configures and builds everything into $1 (Release); extra arguments go to cmake.
ringtrain_build() {
  local build_dir="$1"
  ringtrain_configure "$@"
  cmake --build "$build_dir" -j "$(nproc)"
}

# What the main jobs do first: install what is missing, let mpirun run as root (exported to
# the caller), and build into $1 the targets that follow, no more (scripts/test.sh builds the
# rest, the tests included). A new build folder gets the CUDA kernels for this machine's GPUs, and
# none where it has none; RINGTRAIN_CUDA_ARCHITECTURES (e.g. "80;90") asks for others. A folder
# configured before keeps its choice (scripts/test.sh's, whose tests run train_gpt.sh in it).
ringtrain_set_up() {
  local build_dir="$1" gpu=()
  shift
  ringtrain_install_packages "${RINGTRAIN_PACKAGES[@]}"
  ringtrain_allow_mpirun_as_root
  mkdir -p "$build_dir"
  if [ -n "${RINGTRAIN_CUDA_ARCHITECTURES:-}" ]; then
    gpu=(-DRINGTRAIN_CUDA=AUTO -DRINGTRAIN_CUDA_ARCHITECTURES="$RINGTRAIN_CUDA_ARCHITECTURES")
  elif [ ! -f "$build_dir/CMakeCache.txt" ]; then
    gpu=(-DRINGTRAIN_CUDA=OFF)
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
      gpu=(-DRINGTRAIN_CUDA=AUTO -DRINGTRAIN_CUDA_ARCHITECTURES=native)
    fi
  fi
  ringtrain_configure "$build_dir" "${gpu[@]}"
  cmake --build "$build_dir" -j "$(nproc)" --target "$@"
}
