#!/usr/bin/env bash
# Entrypoint of the MPIJob launcher: waits until every worker in the hostfile resolves and accepts
# TCP connections on the SSH port, then execs its arguments (mpirun ...) through forward_sigterm.sh. Without it, mpirun can
# start while a worker's DNS record or sshd is not there yet, and the job fails with an ssh error
# that names no cause. The wait is bounded: on time-out one line names the first host that is not
# ready and why, and the launcher exits 1 (the MPIJob's backoffLimit then decides about a retry).
#
#   launcher-entrypoint.sh mpirun ringtrain train ...
#
# The rank count is written once, by the operator, in the hostfile (Worker replicas x
# slotsPerWorker slots). When COMMAND is mpirun (or mpiexec) without -np/-n, the entrypoint adds
# `-np SLOTS`, and sets RINGTRAIN_EXPECT_WORLD_SIZE to the rank count (-np's value where given),
# so `ringtrain train` refuses to start on any other number of ranks. Environment variables set
# on the launcher pod do not reach ranks started over SSH: the entrypoint forwards every NCCL_*
# and RINGTRAIN_* variable (`-x NAME` for Open MPI, `-genvlist` for MPICH-derived mpiexec).
#
# Environment (all optional):
#   RINGTRAIN_HOSTFILE      the hostfile (default /etc/mpi/hostfile, where the MPI operator puts
#                           it: lines "host slots=N" for Open MPI, "host:N" for Intel MPI/MPICH)
#   RINGTRAIN_SSH_PORT      the workers' sshd port (default 2222, the mpi-operator images' port)
#   RINGTRAIN_WAIT_SECONDS  how long to wait for all hosts together (default 300)
set -euo pipefail

hostfile="${RINGTRAIN_HOSTFILE:-/etc/mpi/hostfile}"
port="${RINGTRAIN_SSH_PORT:-2222}"
wait_seconds="${RINGTRAIN_WAIT_SECONDS:-300}"
say() { printf '[launcher] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ $# -gt 0 ] || die "usage: launcher-entrypoint.sh COMMAND [ARG...] (for example mpirun -np 8 ringtrain train ...)"
[[ "$port" =~ ^[0-9]+$ ]] || die "RINGTRAIN_SSH_PORT '$port' is not a port number"
[[ "$wait_seconds" =~ ^[0-9]+$ ]] || die "RINGTRAIN_WAIT_SECONDS '$wait_seconds' is not a number of seconds"
[ -r "$hostfile" ] || die "cannot read the hostfile $hostfile (is the MPI operator's config volume mounted at /etc/mpi?)"

# Host names, one per line: the first word of each line, without ":slots" or a comment; and the
# slots: "host slots=N" (Open MPI), "host:N" (Intel MPI/MPICH), 1 where a line says neither.
hosts=()
total_slots=0
while read -r host rest; do
  host="${host%%#*}"
  [ -n "$host" ] || continue
  slots=1
  if [[ "$host" == *:* ]]; then
    slots="${host#*:}"
  elif [[ " ${rest%%#*} " =~ [[:space:]]slots=([^[:space:]]*) ]]; then
    slots="${BASH_REMATCH[1]}"
  fi
  [[ "$slots" =~ ^[1-9][0-9]*$ ]] || die "the hostfile $hostfile gives host ${host%%:*} '$slots' slots, not a positive number"
  hosts+=("${host%%:*}")
  total_slots=$((total_slots + slots))
done <"$hostfile"
[ "${#hosts[@]}" -gt 0 ] || die "the hostfile $hostfile names no host"

# address HOST: the first address HOST resolves to, or nothing.
address() { getent hosts "$1" | awk '{ print $1; exit }'; }

# accepts HOST SECONDS: whether HOST accepts a TCP connection on the SSH port within SECONDS.
# bash's /dev/tcp makes the connection; `timeout` bounds a connect that is never answered.
# shellcheck disable=SC2016  # $0 and $1 belong to the inner bash
accepts() {
  timeout "$2" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$port" 2>/dev/null
}

start=$SECONDS
deadline=$((SECONDS + wait_seconds))
say "waiting up to ${wait_seconds} s for ${#hosts[@]} hosts to resolve and accept SSH on port $port"
for host in "${hosts[@]}"; do
  while :; do
    ip="$(address "$host" || true)"
    remaining=$((deadline - SECONDS))
    if [ -n "$ip" ]; then
      attempt=$((remaining < 2 ? (remaining < 1 ? 1 : remaining) : 2))
      accepts "$ip" "$attempt" && break
      [ "$remaining" -gt 0 ] ||
        die "host $host ($ip) did not accept SSH connections on port $port within ${wait_seconds} s (is its sshd running and the port right?)"
    else
      [ "$remaining" -gt 0 ] || die "host $host did not resolve within ${wait_seconds} s (does the worker pod exist, and its Service?)"
    fi
    sleep 1
  done
done

# mpirun without -np gets the hostfile's slots; the ranks get the expected world size and the
# pod's NCCL_* and RINGTRAIN_* variables (the entrypoint's own three are the launcher's only).
if [[ "$(basename "$1")" =~ ^(mpirun|mpiexec)$ ]]; then
  # mpirun's own -np, not one of the program's arguments (`sh -c ...`): the scan stops at the
  # program, the first word that is a command on PATH and no option's value.
  np=""
  previous=""
  for arg in "${@:2}"; do
    case "$previous" in
      -np | -n | --np | -c) np="$arg" ;;
      -*) ;;
      *) [[ "$arg" != -* ]] && command -v "$arg" >/dev/null 2>&1 && break ;;
    esac
    previous="$arg"
  done
  mpi=("$1")
  [ -n "$np" ] || { np="$total_slots" && mpi+=(-np "$np"); }
  export RINGTRAIN_EXPECT_WORLD_SIZE="${RINGTRAIN_EXPECT_WORLD_SIZE:-$np}"
  names=()
  while read -r name; do
    case "$name" in RINGTRAIN_HOSTFILE | RINGTRAIN_SSH_PORT | RINGTRAIN_WAIT_SECONDS) continue ;; esac
    names+=("$name")
  done < <(compgen -e | grep -E '^(NCCL|RINGTRAIN)_')
  if "$1" --version 2>&1 | grep -qiE 'hydra|mpich|intel'; then
    mpi+=(-genvlist "$(IFS=,; echo "${names[*]}")")
  else
    for name in "${names[@]}"; do mpi+=(-x "$name"); done
  fi
  set -- "${mpi[@]}" "${@:2}"
fi
say "all ${#hosts[@]} hosts accept SSH ($((SECONDS - start)) s): $*"
# Kubernetes stops a pod with SIGTERM: forward_sigterm.sh passes it to mpirun and exits with the
# ranks' status for a SIGTERM stop (143), where mpirun alone would exit 1. It sits beside this
# file in the image (/opt/ringtrain/bin), in scripts/lib in the repository.
here="$(dirname "${BASH_SOURCE[0]}")"
for forward in "$here/forward_sigterm.sh" "$here/../scripts/lib/forward_sigterm.sh"; do
  [ -x "$forward" ] && exec "$forward" "$@"
done
exec "$@"
