# shellcheck shell=bash
# The inner part of scripts/image/run_image_cluster.sh, run by netns_cluster.sh in the launcher's
# network namespace: starts the workers' sshd, runs the launcher's probe and its training, checks
# what they printed. Reads the variables run_image_cluster.sh wrote (state, workers, slots, pods,
# rootfs, launcher_command, launcher_env, image_env, fetch_mnist).
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

# pod_exec POD COMMAND...: COMMAND in POD (launcher, node0, ...), in its network namespace with
# its host name, with the image's environment, the given NAME=VALUE words and what the operator
# sets on an MPIJob's launcher.
pod_exec() {
  local pod="$1" netns=() environment=()
  shift
  [ "$pod" = launcher ] || netns=(ip netns exec "$RINGTRAIN_NETNS_PREFIX-$pod")
  mapfile -t environment <<<"$image_env"
  environment+=(HOME=/home/mpiuser USER=mpiuser LOGNAME=mpiuser)
  if [ "$pod" = launcher ]; then
    environment+=("${launcher_env[@]}" OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile
      OMPI_MCA_orte_keep_fqdn_hostnames=true "OMPI_MCA_plm_rsh_args=-o ConnectionAttempts=10"
      "OMPI_MCA_orte_set_default_slots=$slots")
  fi
  "${netns[@]}" unshare --uts --mount --propagation private bash -c "$pod_setup" pod_setup \
    "$pod" "${rootfs[$pod]}" "$state" /usr/bin/env -i -C /home/mpiuser "${environment[@]}" "$@"
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
  local pod sshd=() status=0 program
  for pod in "${pods[@]:1}"; do
    pod_exec "$pod" /usr/sbin/sshd -De -f /home/mpiuser/.sshd_config >"$state/$pod.log" 2>&1 &
    sshd+=($!)
  done
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
  for pod in "${sshd[@]}"; do kill -TERM "$pod" 2>/dev/null || true; done
  wait || true
  for pod in "${pods[@]:1}"; do
    image_say "$pod's sshd: $(grep -c 'Accepted publickey for mpiuser' "$state/$pod.log" || true) logins of mpiuser by key"
  done
  [ "$status" -eq 0 ] || { image_say "error: the launcher exited with status $status"; return "$status"; }
  pods_check "$state/probe.log" "$state/train.log"
}
