# shellcheck shell=bash
# Shared by build_image.sh and run_image_cluster.sh: messages, the tool check, and buildah with
# the scripts' own image storage under the work folder (the machine's storage stays untouched).

image_say() { printf '[image] %s\n' "$*" >&2; }
image_die() { image_say "error: $*"; exit 2; }

image_work="${RINGTRAIN_IMAGE_WORK:-/var/tmp/ringtrain-image}"
image_driver="${RINGTRAIN_IMAGE_DRIVER:-overlay}"

# image_need_tools TOOL...: returns 77 naming the first missing tool (or root), else 0.
image_need_tools() {
  local tool
  if [ "$(id -u)" -ne 0 ]; then
    image_say "skipped: needs root (buildah with chroot isolation, mounts, network namespaces)"
    return 77
  fi
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      image_say "skipped: '$tool' is not installed (apt-get install $tool)"
      return 77
    fi
  done
}

# The buildah command line with the storage of $image_work; call after the options are read.
image_storage() {
  image_buildah=(buildah --root "$image_work/storage" --runroot "$image_work/run"
    --storage-driver "$image_driver")
}

# image_size IMAGE: its size as buildah reports it (for example "372 MB").
image_size() {
  "${image_buildah[@]}" images --format '{{.Size}}' "$1" | head -n 1
}
