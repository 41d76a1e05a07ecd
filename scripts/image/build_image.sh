#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Builds the ringtrain image (k8s/Dockerfile) on a machine that reaches Debian's package mirrors
# but no container registry: mmdebstrap makes a Debian root file system from packages, buildah
# imports it as the base image and builds k8s/Dockerfile on it (BASE_IMAGE and
# RUNTIME_BASE_IMAGE), with chroot isolation, so no container runtime is needed. The base tarball
# and the image storage go to --work; the storage is this script's own (buildah --root
# WORK/storage), not the machine's.
# Needs root, mmdebstrap and buildah (Debian packages of the same names). A second run reuses
# the base tarball and buildah's cached layers (--layers). Prints the image's size at the end.
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
# shellcheck source=scripts/image/common.sh
source "$root/scripts/image/common.sh"

ringtrain_opt --work image_work "$image_work" "the work folder (\$RINGTRAIN_IMAGE_WORK sets the default)" nonempty
ringtrain_opt --tag tag "" "the image's name (default localhost/ringtrain:VARIANT)" nonempty
ringtrain_opt --variant variant cpu "k8s/Dockerfile's VARIANT: cpu or cuda (needs NVIDIA's repository)" nonempty
ringtrain_opt --suite suite bookworm "the Debian release of the base" nonempty
ringtrain_opt --driver image_driver "$image_driver" "the storage driver: overlay, or vfs where overlay cannot mount" nonempty
ringtrain_flag --dry-run dry_run "print the commands (and any missing tool), change nothing; needs no tool"
ringtrain_flag --check check_only "only check that the tools are here: exit 0, or name the missing one and exit 77 (CTest's SKIP_RETURN_CODE)"
ringtrain_parse_args "$@"

case "$variant" in cpu | cuda) ;; *) image_die "--variant '$variant': expected cpu or cuda" ;; esac
tag="${tag:-localhost/ringtrain:$variant}"
image_storage
tools=0
image_need_tools mmdebstrap buildah || tools=$?
if [ "$check_only" -eq 1 ]; then
  [ "$tools" -ne 0 ] || image_say "mmdebstrap and buildah are here, running as root"
  exit "$tools"
fi

base="localhost/debian-mmdebstrap:$suite"
tarball="$image_work/debian-$suite.tar"
mirror="http://deb.debian.org/debian"
# minbase (Essential packages and apt), without manuals, documentation and translations: the size
# and content of the public debian:SUITE-slim image, which k8s/Dockerfile's run stage starts from.
debstrap=(mmdebstrap --variant=minbase
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*'
  "$suite" "$tarball"
  "deb $mirror $suite main" "deb $mirror $suite-updates main"
  "deb http://deb.debian.org/debian-security $suite-security main")
# VARIANT is passed although it has a default: buildah 1.28 finds the stages a build needs from
# --build-arg values only, and without it skips the toolchain stage that `FROM toolchain-${VARIANT}`
# names.
build=("${image_buildah[@]}" build --isolation chroot --layers --build-arg "VARIANT=$variant"
  --build-arg "BASE_IMAGE=$base" --build-arg "RUNTIME_BASE_IMAGE=$base" --build-arg "DEBIAN=$suite"
  -f "$root/k8s/Dockerfile" -t "$tag" "$root")

if [ "$dry_run" -eq 1 ]; then
  image_say "dry run; would run:"
  [ -f "$tarball" ] || printf '  %s\n' "${debstrap[*]}"
  printf '  %s\n' "import $tarball as $base (buildah from scratch, add, commit)" "${build[*]}"
  exit 0
fi
[ "$tools" -eq 0 ] || exit "$tools"

mkdir -p "$image_work"
start=$SECONDS
if [ ! -f "$tarball" ]; then
  image_say "making the Debian $suite base with mmdebstrap (a few minutes)"
  "${debstrap[@]}" 2>&1 | tail -n 3
fi
if ! "${image_buildah[@]}" inspect --type image "$base" >/dev/null 2>&1; then
  image_say "importing $tarball as $base"
  container="$("${image_buildah[@]}" from scratch)"
  "${image_buildah[@]}" add "$container" "$tarball" / >/dev/null
  "${image_buildah[@]}" commit "$container" "$base" >/dev/null
  "${image_buildah[@]}" rm "$container" >/dev/null
fi
image_say "building $tag from k8s/Dockerfile on $base"
"${build[@]}"
image_say "built $tag in $((SECONDS - start)) s; size: $(image_size "$tag")"
