#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# A multi-node cluster on one machine: K hosts as Linux network namespaces, each with its own
# address, host name and network link, joined by a bridge (the "switch"), and a launcher host
# from which COMMAND runs. Inside COMMAND a plain `mpirun -np N PROGRAM` spans the hosts over real
# TCP, the way it spans the workers of a Kubeflow MPIJob: the same OMPI_MCA_* variables the MPI
# operator sets on its launcher (a default hostfile, an rsh agent) are set here. Open MPI only.
#
#   scripts/mpirun/netns_cluster.sh [options] [--] COMMAND [ARG...]
#   scripts/mpirun/netns_cluster.sh --hosts 2 --slots 2 -- \
#       mpirun -np 4 build/bin/ringtrain train --synthetic --steps 50
#   scripts/mpirun/netns_cluster.sh --hosts 4 --rate 1gbit -- \
#       mpirun -np 4 build/bin/allreduce_perf -b 1M -e 64M -f 4
#
# --rate shapes every link in both directions with tc tbf. Shape only below what the unshaped
# path carries (scaling_sweep.sh's `path` part measures it); above it the limit is the machine, not
# the link. With --btl tcp,self (the default) every byte between ranks, also between two ranks of
# one host, goes through TCP; self,vader,tcp uses shared memory within a host, as a real node would.
#
# In COMMAND's environment: OMPI_MCA_orte_default_hostfile (hosts node0..node<K-1>, slots=N),
# OMPI_MCA_plm_rsh_agent (scripts/mpirun/netns_rsh.sh), the TCP interface selection, and
# RINGTRAIN_CLUSTER_HOSTS=K, RINGTRAIN_CLUSTER_SLOTS=N. When COMMAND ends, one line per host gives
# the bytes its link carried, then everything is removed: namespaces, links, files. The same happens
# on Ctrl-C or SIGTERM. Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2 and util-linux.
#
# Layout: the "switch" namespace holds the bridge; every host namespace (launcher, node0, ...) has
# an eth0 on 10.250.0.0/24 whose veth peer is a bridge port. Nothing is added to the caller's own
# network namespace, so several clusters can run side by side (names carry this script's PID).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/args.sh
source "$script_dir/../lib/args.sh"
say() { printf '[netns-cluster] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

ringtrain_opt --hosts hosts 2 "number of hosts" nonempty
ringtrain_opt --slots slots 1 "MPI slots (ranks) per host in the hostfile" nonempty
ringtrain_opt --rate rate "" "shape every link to RATE (tc's units: 100mbit, 1gbit, ...); default: unshaped" nonempty
ringtrain_opt --btl btl tcp,self "Open MPI's byte-transfer layers" nonempty
ringtrain_flag --check check_only "only check that network namespaces can be made here: exit 0, or print why not and exit 77 (CTest's SKIP_RETURN_CODE)"
ringtrain_flag --keep-env keep_env "keep the caller's environment on the hosts (default: a clean one, as ssh gives; forward variables with mpirun -x NAME)"
ringtrain_rest command_line "COMMAND [ARG...], run on the launcher host" command
ringtrain_parse_args "$@"
if ! [[ "$hosts" =~ ^[1-9][0-9]*$ ]] || [ "$hosts" -gt 200 ]; then die "--hosts '$hosts': expected 1 to 200"; fi
[[ "$slots" =~ ^[1-9][0-9]*$ ]] || die "--slots '$slots': expected a positive number"
[ -z "$rate" ] || [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?([kmg]?bit)$ ]] ||
  die "--rate '$rate': expected a rate like 100mbit or 1gbit"

prefix="rt$$"
switch_ns="$prefix-sw"
subnet="10.250.0"
launcher_ip="$subnet.254"
work=""
namespaces=()

# Namespaces need root (or CAP_SYS_ADMIN): a container without it, or a kernel without netns,
# says no here, and the tests skip instead of failing.
check_namespaces() {
  local probe="$prefix-probe" why
  for tool in ip tc unshare; do
    command -v "$tool" >/dev/null 2>&1 || { say "cannot build the cluster: '$tool' is not installed (iproute2, util-linux)"; return 77; }
  done
  if ! why="$(ip netns add "$probe" 2>&1)"; then
    say "cannot build the cluster: 'ip netns add' failed here: ${why:-no reason given} (needs root or CAP_SYS_ADMIN)"
    return 77
  fi
  if ! why="$(ip -n "$probe" link add probe0 type veth peer name probe1 2>&1)"; then
    ip netns delete "$probe" 2>/dev/null || true
    say "cannot build the cluster: veth links cannot be made here: $why"
    return 77
  fi
  ip netns delete "$probe"
}

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  local status=$? ns pid
  trap - EXIT INT TERM
  # Processes still inside a host (an orted or a rank after Ctrl-C) are ours: end them before the
  # namespace goes, or they would live on in a namespace nobody can name.
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  done
  sleep 0.2
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  [ -z "$work" ] || rm -rf "$work"
  exit "$status"
}

# host_ns NAME: the namespace of host NAME (launcher, node0, node1, ...).
host_ns() { printf '%s-%s' "$prefix" "$1"; }

# shape NAMESPACE DEVICE: caps DEVICE's egress at $rate. The bucket holds 4 ms of traffic (at
# least 64 KiB, so a 64 KiB GSO segment of the veth passes whole): that is the burst a 250 Hz
# kernel timer needs to reach the rate, and small against the megabytes an all-reduce moves.
shape() {
  local bits bytes_per_s burst
  bits="$(rate_bits "$rate")"
  bytes_per_s=$((bits / 8))
  burst=$((bytes_per_s / 250))
  [ "$burst" -ge 65536 ] || burst=65536
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$rate" burst "$burst" latency "${RINGTRAIN_NETNS_QUEUE:-20ms}"
}

# rate_bits RATE: tc's rate unit in bits per second (100mbit -> 100000000).
rate_bits() {
  local number="${1%%[kmg]bit*}" unit="${1#"${1%%[kmg]bit}"}"
  [ "$unit" != "$1" ] || unit="bit"
  case "$unit" in
    kbit) awk -v n="$number" 'BEGIN { printf "%d", n * 1e3 }' ;;
    mbit) awk -v n="$number" 'BEGIN { printf "%d", n * 1e6 }' ;;
    gbit) awk -v n="$number" 'BEGIN { printf "%d", n * 1e9 }' ;;
    *) awk -v n="${1%bit}" 'BEGIN { printf "%d", n }' ;;
  esac
}

# add_host NAME ADDRESS: a namespace with eth0 at ADDRESS, plugged into the bridge, its own
# /etc/hosts (ip netns exec mounts /etc/netns/NS/hosts over /etc/hosts) and, if asked, a shaped
# link in both directions, as a switch port and a NIC of that speed would be.
add_host() {
  local name="$1" address="$2" ns port
  ns="$(host_ns "$name")"
  port="p-$name"
  ip netns add "$ns"
  namespaces+=("$ns")
  ip -n "$switch_ns" link add "$port" type veth peer name eth0 netns "$ns"
  ip -n "$switch_ns" link set "$port" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  mkdir -p "/etc/netns/$ns"
  cp "$work/hosts" "/etc/netns/$ns/hosts"
  if [ -n "$rate" ]; then
    shape "$ns" eth0
    shape "$switch_ns" "$port"
  fi
}

# link_bytes NAME: "sent received" bytes of host NAME's eth0.
link_bytes() {
  # shellcheck disable=SC2016  # expanded by the inner shell
  ip netns exec "$(host_ns "$1")" sh -c \
    'echo "$(cat /sys/class/net/eth0/statistics/tx_bytes) $(cat /sys/class/net/eth0/statistics/rx_bytes)"'
}

if [ "$check_only" -eq 1 ]; then
  check_namespaces || exit $?
  say "network namespaces can be made here"
  exit 0
fi
[ "${#command_line[@]}" -gt 0 ] || die "no command given (see --help)"
[ "$(id -u)" -eq 0 ] || die "needs root to make network namespaces (run with sudo)"
check_namespaces || exit $?

command_pid=""
# stop SIGNAL STATUS: pass SIGNAL on to the command, give mpirun a moment to end its ranks, exit.
# shellcheck disable=SC2317  # called by the INT and TERM traps
stop() {
  say "$1: removing the cluster"
  if [ -n "$command_pid" ]; then
    kill -"$1" "$command_pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$command_pid" 2>/dev/null || break
      sleep 0.3
    done
  fi
  exit "$2"
}
trap cleanup EXIT
trap 'stop INT 130' INT
trap 'stop TERM 143' TERM

work="$(mktemp -d "${TMPDIR:-/tmp}/netns-cluster.XXXXXX")"
{
  printf '127.0.0.1 localhost\n%s launcher\n' "$launcher_ip"
  for ((i = 0; i < hosts; ++i)); do printf '%s.%d node%d\n' "$subnet" $((i + 1)) "$i"; done
} >"$work/hosts"
for ((i = 0; i < hosts; ++i)); do printf 'node%d slots=%d\n' "$i" "$slots"; done >"$work/hostfile"

ip netns add "$switch_ns"
namespaces+=("$switch_ns")
ip -n "$switch_ns" link add br0 type bridge
ip -n "$switch_ns" link set br0 up
# Bridged frames need not pass the (empty) iptables of the switch; where br_netfilter is loaded
# this saves a hook per packet. Absent on kernels without it, and harmless then.
ip netns exec "$switch_ns" sysctl -qw net.bridge.bridge-nf-call-iptables=0 2>/dev/null || true
add_host launcher "$launcher_ip"
for ((i = 0; i < hosts; ++i)); do add_host "node$i" "$subnet.$((i + 1))"; done
say "$hosts hosts × $slots slots on $subnet.0/24, links ${rate:-unshaped}, btl $btl"

# What the MPI operator sets on an MPIJob launcher, adapted: hostfile, rsh agent, TCP on the
# cluster subnet only (Open MPI would otherwise also try lo), ranks unbound (every host sees all
# of this machine's cores; binding would pile each host's ranks onto cores 0..N-1).
export OMPI_MCA_orte_default_hostfile="$work/hostfile"
export OMPI_MCA_plm_rsh_agent="$script_dir/netns_rsh.sh"
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_btl="$btl"
export OMPI_MCA_btl_tcp_if_include="$subnet.0/24"
export OMPI_MCA_oob_tcp_if_include="$subnet.0/24"
export OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_pml=ob1
# All hosts share this machine's cores. Open MPI spins while it waits for a message, and a host
# cannot see that its neighbours' ranks need the same cores: with more ranks than cores, spinning
# ranks starve the rank that would send. A real node has its own cores and does not need this.
if [ $((hosts * slots)) -gt "$(nproc)" ]; then
  export OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}"
fi
export RINGTRAIN_NETNS_PREFIX="$prefix" RINGTRAIN_NETNS_KEEP_ENV="$keep_env"
export RINGTRAIN_CLUSTER_HOSTS="$hosts" RINGTRAIN_CLUSTER_SLOTS="$slots"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

# The command runs in the background and the script waits for it: bash runs a trap only between
# commands, and `wait` is the one command a signal interrupts. On SIGINT/SIGTERM the trap passes
# the signal on to the command (mpirun then takes its ranks down), and cleanup removes the rest.
ip netns exec "$(host_ns launcher)" unshare --uts sh -c 'echo launcher >/proc/sys/kernel/hostname && exec "$@"' \
  launcher "${command_line[@]}" &
command_pid=$!
status=0
wait "$command_pid" || status=$?
command_pid=""
for ((i = 0; i < hosts; ++i)); do
  read -r sent received <<<"$(link_bytes "node$i")"
  say "node$i link: sent $((sent / 1048576)) MiB, received $((received / 1048576)) MiB"
done
exit "$status"
