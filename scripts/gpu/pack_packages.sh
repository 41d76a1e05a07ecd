#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Gathers the Debian packages of the libraries ringtrain builds against into one folder, to carry
# to a GPU machine that cannot reach a package registry (docs/gpu.md); there,
# scripts/gpu/unpack_packages.sh (or device_check.sh --packages DIR) adds the files it lacks.
# Takes each .deb from apt's cache, else downloads it. Run on Debian 12 (bookworm), whose
# libraries also run on the newer Ubuntu of the GPU image.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
ringtrain_opt --out out "$ringtrain_root/.gpu-packages" "the folder (about 42 MB)"
ringtrain_parse_args "$@"
packages=(
  # the H200 image (2026-11-30) lacked Boost.Program_options and OpenBLAS's serial build
  libboost-program-options-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libboost1.74-dev libopenblas-serial-dev libopenblas0-serial libopenblas-dev
  # the rest of the build's libraries, each unpacked only where the machine lacks its files
  libfmt-dev libfmt9 nlohmann-json3-dev libeigen3-dev libgtest-dev googletest zlib1g-dev
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 pybind11-dev
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
  libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libhdf5-hl-100 libhdf5-hl-cpp-100 libsz2 libaec0
  libaec-dev hdf5-helpers
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libpmix-dev libhwloc15
  libhwloc-dev libevent-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-extra-2.1-7
  libevent-openssl-2.1-7 libevent-dev libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2
  libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libltdl7 libxnvctrl0
  libpciaccess0
)
mkdir -p "$out"
cd "$out"
for package in "${packages[@]}"; do
  cached=(/var/cache/apt/archives/"${package}"_*.deb)
  if [[ -f ${cached[0]} ]]; then
    cp "${cached[0]}" .
  else
    apt-get download -qq "$package" 2>/dev/null || { ringtrain_say "error: cannot fetch $package"; exit 1; }
  fi
done
ringtrain_say "$(find . -name '*.deb' | wc -l) packages, $(du -sh . | cut -f1), in $out"
