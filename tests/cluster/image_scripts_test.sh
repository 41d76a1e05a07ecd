#!/usr/bin/env bash
# The image scripts (scripts/image/) and the image's build files, quickly: syntax and shellcheck,
# the dry runs' command lines (the locally imported base passed as BASE_IMAGE and
# RUNTIME_BASE_IMAGE, chroot isolation; the launcher's command taken from k8s/mpijob.yaml with
# --steps for --epochs), the refusals of bad options, and the Dockerfile's and .dockerignore's
# rules: overridable bases, no exact Debian revision pinned, NCCL pinned to the CUDA major, the
# downloaded key checked, the data tools in the image, the build folders and data left out.
# The real build and run (many minutes) are scripts/test.sh --full's.
#   image_scripts_test.sh
# shellcheck disable=SC2016  # the patterns below are the Dockerfile's own text, ${...} and all
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/scripts/image/build_image.sh"
run="$root/scripts/image/run_image_cluster.sh"
dockerfile="$root/k8s/Dockerfile"
# shellcheck source=tests/support/checks.sh
source "$root/tests/support/checks.sh"
# refuses NAME PATTERN COMMAND...: COMMAND exits 2 and says PATTERN.
refuses() {
  local name="$1" pattern="$2" output status=0
  shift 2
  output="$("$@" 2>&1)" || status=$?
  if [ "$status" -eq 2 ] && grep -qF -- "$pattern" <<<"$output"; then ok "$name"; else fail "$name (status $status)" "$output"; fi
}

# 1. Syntax and shellcheck.
scripts=("$root"/scripts/image/*.sh "$root/tests/cluster/image_scripts_test.sh")
for script in "${scripts[@]}"; do bash -n "$script" || fail "bash -n $script"; done
ok "bash -n: ${#scripts[@]} scripts"
if command -v shellcheck >/dev/null 2>&1; then
  if output="$(cd "$root" && shellcheck -x -P SCRIPTDIR "${scripts[@]}" 2>&1)"; then ok "shellcheck: ${#scripts[@]} scripts"; else fail "shellcheck" "$output"; fi
else
  echo "skip shellcheck: not installed"
fi

# 2. Dry runs: what would be run, whether or not the tools are here.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
output="$("$build" --dry-run --work "$work" 2>&1)"
check "build_image.sh --dry-run" "$output" "mmdebstrap --variant=minbase" "bookworm $work/debian-bookworm.tar" \
  "build --isolation chroot" "--build-arg VARIANT=cpu" \
  "--build-arg BASE_IMAGE=localhost/debian-mmdebstrap:bookworm" \
  "--build-arg RUNTIME_BASE_IMAGE=localhost/debian-mmdebstrap:bookworm" \
  "-f $dockerfile -t localhost/ringtrain:cpu $root" "--root $work/storage"
output="$("$run" --dry-run --work "$work" --workers 3 --slots 2 --steps 40 2>&1)"
status=$?
if [ "$status" -eq 77 ]; then
  echo "skip run_image_cluster.sh --dry-run: $output"
else
  check "run_image_cluster.sh --dry-run: the manifest's launcher, --steps for --epochs" "$output" \
    "3 workers x 2 slots" "RINGTRAIN_SSH_PORT=2222 /opt/ringtrain/bin/launcher-entrypoint.sh mpirun --map-by slot" \
    "ringtrain train --data /mnt/ringtrain/data/mnist --model cnn --steps 40 --batch-size 64"
  if grep -q -- "--epochs" <<<"$output"; then fail "run_image_cluster.sh --dry-run still passes --epochs" "$output"; fi
fi
refuses "build_image.sh refuses an unknown variant" "--variant 'gpu'" "$build" --dry-run --variant gpu
refuses "run_image_cluster.sh refuses --workers 0" "--workers '0'" "$run" --dry-run --workers 0
refuses "run_image_cluster.sh refuses an unknown option" "unknown option '--np'" "$run" --np 4
refuses "run_image_cluster.sh refuses an unknown kind of pod" "--pods 'vm'" "$run" --dry-run --pods vm
# --check: 0 where everything is here, else 77 and the missing piece named.
for script in "$build" "$run"; do
  status=0
  output="$("$script" --check 2>&1)" || status=$?
  case "$status" in
    0) ok "$(basename "$script") --check: the tools are here" ;;
    77) check "$(basename "$script") --check names what is missing" "$output" "skipped: " ;;
    *) fail "$(basename "$script") --check: status $status" "$output" ;;
  esac
done

# 3. The Dockerfile's rules.
dockerfile_text="$(cat "$dockerfile")"
check "Dockerfile: the bases are build arguments" "$dockerfile_text" \
  'ARG BASE_IMAGE=debian:${DEBIAN}' 'ARG RUNTIME_BASE_IMAGE=debian:${DEBIAN}-slim' \
  'FROM ${BASE_IMAGE} AS toolchain-cpu' 'FROM ${RUNTIME_BASE_IMAGE} AS runtime-cpu'
if grep -nE '^FROM (debian|ubuntu|nvidia)' "$dockerfile"; then fail "Dockerfile: a FROM names a public image directly"; else ok "Dockerfile: no FROM names a public image directly"; fi
# A version with a Debian revision and no wildcard (openmpi-bin=4.1.4-3+b1, or an ARG holding it)
# breaks at the next point release.
if pins="$(grep -noE '[A-Za-z0-9_.+-]+=[0-9]+\.[0-9][^ *"]*-[^ *"]+' "$dockerfile")"; then
  fail "Dockerfile: exact Debian revisions pinned" "$pins"
else
  ok "Dockerfile: no exact Debian revision pinned"
fi
check "Dockerfile: Open MPI 4.1 checked in both stages, NCCL for the CUDA major" "$dockerfile_text" \
  "mpirun --version | grep -q 'Open MPI) 4\\.1\\.'" '"libnccl2=*+cuda${CUDA_VERSION%%-*}.*"' \
  '"libnccl-dev=*+cuda${CUDA_VERSION%%-*}.*"'
if [ "$(grep -c "Open MPI) 4" "$dockerfile")" -ge 2 ]; then
  ok "Dockerfile: Open MPI's version checked in the toolchain and the run stage"
else
  fail "Dockerfile: Open MPI's version is not checked in the toolchain and the run stage"
fi
# Every ADD (a download) is checked before use: the only one, NVIDIA's key, by its fingerprint.
adds="$(grep -c '^ADD ' "$dockerfile")"
check "Dockerfile: NVIDIA's key is checked against its fingerprint ($adds download)" "$dockerfile_text" \
  'gpg --show-keys --with-colons /tmp/cuda.pub' '[ "$fingerprints" = "${CUDA_KEY_FINGERPRINT}" ]'
[ "$adds" -eq 1 ] || fail "Dockerfile: $adds ADDs of URLs; each needs a check like the key's"
check "Dockerfile: the CUDA architectures are a build argument passed to CMake" "$dockerfile_text" \
  '"-DRINGTRAIN_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"'
if grep -qx 'ARG CUDA_ARCHITECTURES=' "$dockerfile"; then ok "Dockerfile: CUDA_ARCHITECTURES empty by default (nvcc's from 7.0 up)"; else fail "Dockerfile: CUDA_ARCHITECTURES has a fixed default"; fi
if grep -n '80;90' "$dockerfile" | grep -v '^[0-9]*:#'; then fail "Dockerfile: fixed CUDA architectures"; else ok "Dockerfile: no fixed CUDA architectures"; fi
check "Dockerfile: the data tools and what data/fetch_mnist.sh needs are in the image" "$dockerfile_text" \
  "cmake --install /build --prefix /opt/ringtrain" "procps curl"

# 4. .dockerignore: what `COPY . .` leaves out.
ignore="$(cat "$root/.dockerignore" 2>/dev/null)"
check ".dockerignore leaves out git, caches, build folders and data" "$ignore" \
  ".git" ".cache" "build*/" "data/mnist/" "data/gpt2/" "data/fortunes/"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
