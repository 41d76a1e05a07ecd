# shellcheck shell=bash
# The pods of scripts/image/run_image_cluster.sh: starts the workers' sshd, runs the launcher's
# probe and its training, checks what they printed. Two kinds of pod ($pod_mode):
#   containers  podman containers (runtime runc) on a podman network of their own;
#   chroot      the image's root file system chrooted in a namespace of netns_cluster.sh, which
#               runs this part inside the launcher's namespace.
# Reads the variables run_image_cluster.sh wrote (state, workers, slots, pods, launcher_command,
# launcher_env, image_env, fetch_mnist, pod_mode, and rootfs, or podman, podman_limits, image,
# network and address).
# shellcheck disable=SC2154  # those variables come from run_image_cluster.sh's cluster.env

# The mounts of a pod, made in its own mount namespace (nothing reaches the machine's), then
# COMMAND as mpiuser chrooted into the pod's root file system. Arguments: POD ROOT STATE COMMAND...
# shellcheck disable=SC2016  # expanded by the inner bash
pod_setup='set -e
pod="$1" r="$2" state="$3"
shift 3
echo "$pod" >/proc/sys/kernel/hostname
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount -t tmpfs -o mode=1777,size=512m shm "$r/dev/shm"
mount --bind /etc/hosts "$r/etc/hosts"
mount --bind -o ro "$state/ssh" "$r/home/mpiuser/.ssh"
mount --bind "$state/shared" "$r/mnt/ringtrain"
[ "$pod" != launcher ] || mount --bind -o ro "$state/mpi" "$r/etc/mpi"
exec chroot --userspec=1000:1000 "$r" "$@"'

# pod_environment POD: NAME=VALUE words of POD's environment, in $environment: the image's, the
# user's, and on the launcher the manifest's env: and what the operator sets on an MPIJob's
# launcher.
pod_environment() {
  mapfile -t environment <<<"$image_env"
  environment+=(HOME=/home/mpiuser USER=mpiuser LOGNAME=mpiuser)
  if [ "$1" = launcher ]; then
    environment+=("${launcher_env[@]}" OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile
      OMPI_MCA_orte_keep_fqdn_hostnames=true "OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10"
      "OMPI_MCA_orte_set_default_slots=$slots")
  fi
}

# pod_options POD: podman run's options for POD, in $options: its name, host name and address on
# the network, every pod's name in /etc/hosts (the Services' DNS records), mpiuser, the key
# mounted read-only (the Secret), the hostfile on the launcher (the ConfigMap), the volume, and
# the environment, within the limits of $podman_limits.
pod_options() {
  local pod="$1" other name
  options=(--name "ringtrain-$$-$pod" --hostname "$pod" --network "$network" --ip "${address[$pod]}"
    --user 1000:1000 --workdir /home/mpiuser --shm-size 512m "${podman_limits[@]}"
    -v "$state/ssh:/home/mpiuser/.ssh:ro" -v "$state/shared:/mnt/ringtrain")
  for other in "${pods[@]}"; do options+=(--add-host "$other:${address[$other]}"); done
  [ "$pod" != launcher ] || options+=(-v "$state/mpi:/etc/mpi:ro")
  pod_environment "$pod"
  for name in "${environment[@]}"; do options+=(-e "$name"); done
}

# pod_exec POD COMMAND...: COMMAND as mpiuser in POD (launcher, node0, ...), with its host name,
# network and mounts, and pod_environment's variables. The launcher's container is made for each
# command; a worker's is running (sshd), so COMMAND joins it, as `kubectl exec` would.
pod_exec() {
  local pod="$1" netns=() environment=() options=()
  shift
  if [ "$pod_mode" = containers ] && [ "$pod" = launcher ]; then
    pod_options "$pod"
    "${podman[@]}" run --rm "${options[@]}" "$image" "$@"
    return
  elif [ "$pod_mode" = containers ]; then
    "${podman[@]}" exec --user 1000:1000 --workdir /home/mpiuser "ringtrain-$$-$pod" "$@"
    return
  fi
  [ "$pod" = launcher ] || netns=(ip netns exec "$RINGTRAIN_NETNS_PREFIX-$pod")
  pod_environment "$pod"
  "${netns[@]}" unshare --uts --mount --propagation private bash -c "$pod_setup" pod_setup \
    "$pod" "${rootfs[$pod]}" "$state" /usr/bin/env -i -C /home/mpiuser "${environment[@]}" "$@"
}

# The workers' sshd, as the manifest runs it, and its end (the logs land in $state/POD.log).
worker_pids=()
pods_start_workers() {
  local pod environment=() options=()
  for pod in "${pods[@]:1}"; do
    if [ "$pod_mode" = containers ]; then
      pod_options "$pod"
      "${podman[@]}" run -d "${options[@]}" "$image" /usr/sbin/sshd -De -f /home/mpiuser/.sshd_config >/dev/null
    else
      pod_exec "$pod" /usr/sbin/sshd -De -f /home/mpiuser/.sshd_config >"$state/$pod.log" 2>&1 &
      worker_pids+=($!)
    fi
  done
}
pods_stop_workers() {
  local pod pid
  for pid in "${worker_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  [ "${#worker_pids[@]}" -eq 0 ] || wait "${worker_pids[@]}" 2>/dev/null || true
  [ "$pod_mode" = containers ] || return 0
  for pod in "${pods[@]:1}"; do
    "${podman[@]}" logs "ringtrain-$$-$pod" >"$state/$pod.log" 2>&1 || true
    "${podman[@]}" rm -f -t 2 "ringtrain-$$-$pod" >/dev/null 2>&1 || true
  done
}

# pods_check PROBE_LOG TRAIN_LOG: whether the probe saw workers x slots ranks on the workers (and
# none on the launcher), and the training ended with a final accuracy. Prints why not.
pods_check() {
  local ranks hosts
  ranks="$(grep -c '^probe: rank ' "$1" || true)"
  hosts="$(sed -n 's/^probe: rank .* on \(.*\)$/\1/p' "$1" | sort -u | tr '\n' ' ')"
  image_say "probe: $ranks ranks on hosts: $hosts"
  if [ "$ranks" -ne $((workers * slots)) ] || [ "$(wc -w <<<"$hosts")" -ne "$workers" ] ||
    grep -q '^probe: rank .* on launcher$' "$1"; then
    image_say "error: expected $((workers * slots)) ranks on the $workers workers"
    return 1
  fi
  grep -q 'final accuracy [0-9.]*' "$2" || { image_say "error: the training printed no final accuracy"; return 1; }
  image_say "the training ended: $(grep -o 'final accuracy [0-9.]*' "$2" | tail -n 1)"
}

pods_run() {
  local pod status=0 program
  pods_start_workers
  # The probe: the manifest's mpirun options (all words before the program), each rank saying
  # where it runs.
  for ((program = 0; program < ${#launcher_command[@]}; ++program)); do
    [ "${launcher_command[$program]}" != ringtrain ] || break
  done
  # shellcheck disable=SC2016  # expanded by the ranks' shell
  pod_exec launcher "${launcher_command[@]:0:program}" \
    sh -c 'echo "probe: rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE on $(uname -n)"' \
    2>&1 | tee "$state/probe.log" || status=$?
  # No IDX files copied: the image's own fetch script puts MNIST on the shared volume.
  if [ "$status" -eq 0 ] && [ "${#fetch_mnist[@]}" -gt 0 ]; then
    pod_exec node0 "${fetch_mnist[@]}" || status=$?
  fi
  if [ "$status" -eq 0 ]; then
    pod_exec launcher "${launcher_command[@]}" 2>&1 | tee "$state/train.log" || status=$?
  fi
  pods_stop_workers
  for pod in "${pods[@]:1}"; do
    image_say "$pod's sshd: $(grep -c 'Accepted publickey for mpiuser' "$state/$pod.log" || true) logins of mpiuser by key"
  done
  [ "$status" -eq 0 ] || { image_say "error: the launcher exited with status $status"; return "$status"; }
  pods_check "$state/probe.log" "$state/train.log"
}
