#!/usr/bin/env bash
# Runs a program (ringtrain train by default) with mpirun across a list of hosts: builds the
# hostfile, chooses the rank count, placement and binding, restricts MPI (and NCCL) to one network,
# and forwards the environment the ranks need, then runs mpirun. The program must be at the same
# path on every host (a shared file system, or the same image); ssh must reach every host without
# a password, as mpirun's default launcher needs. Open MPI only (--map-by, --bind-to, -x, OMPI_MCA_*);
# with an MPICH-derived MPI run its mpiexec by hand (docs/cluster.md, MPICH and other MPIs).
#
#   scripts/mpirun/run_hosts.sh [options] [--] [PROGRAM ARG...]
#   scripts/mpirun/run_hosts.sh --hosts gpu01:4,gpu02:4 --iface ib0 -- \
#       ringtrain train --data /shared/mnist --checkpoint-dir /shared/ckpt --resume auto
#   scripts/mpirun/run_hosts.sh --hostfile scripts/mpirun/hostfile.example --dry-run
#   scripts/mpirun/run_hosts.sh --hosts localhost:2 -- build/bin/ringtrain train --synthetic --steps 100
#
# Without PROGRAM: `ringtrain train` with no arguments; ringtrain is the one beside this script (an
# installed copy: cmake --install puts both in PREFIX/bin), else on PATH, else this checkout's
# build/bin.
# For `ringtrain train`, --expect-world-size N is added (unless given), so a launcher that starts
# another number of ranks than asked is refused instead of training on the wrong machines.
#
# Options:
#   --hosts LIST      HOST[:SLOTS],... (slots: ranks on that host, default 1; one per GPU)
#   --hostfile FILE   an Open MPI hostfile ("HOST slots=N" lines; see hostfile.example) instead
#   --np N            number of ranks (default: all slots)
#   --map-by SPEC     rank placement (default slot: fill each host's slots before the next one,
#                     so ranks 0..S-1 are host 1's and the node-local rank picks the GPU;
#                     ppr:1:socket:PE=8 etc. for CPU jobs)
#   --bind-to WHAT    none (default: GPUs; the CPU set follows from the GPU), core, socket, numa
#   --iface NAME      one network for all traffic: MPI's TCP byte-transfer and out-of-band layers
#                     (btl_tcp_if_include, oob_tcp_if_include) and NCCL (NCCL_SOCKET_IFNAME).
#                     A name (eth0, ib0) or a CIDR subnet (10.0.0.0/24; MPI only). Default: as
#                     OMPI_MCA_* and NCCL_* variables already say, else MPI's own choice.
#   --env NAME[=VAL]  forward NAME (set to VAL) to every rank; repeatable. Always forwarded:
#                     PATH, LD_LIBRARY_PATH, and every RINGTRAIN_*, NCCL_*, CUDA_*, OMP_* variable
#                     set here (ssh starts the remote ranks with a bare environment).
#   --oversubscribe   allow more ranks than slots (tests on a laptop)
#   --dry-run         print the mpirun command line and the hostfile, run nothing
# MPIRUN_ARGS adds mpirun options verbatim (word-split). As root, Open MPI's two run-as-root
# variables are set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
say() { printf '[run-hosts] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

hosts="" hostfile="" np="" map_by="slot" bind_to="none" iface="" oversubscribe=0 dry_run=0
forward=()
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts="${2:?--hosts needs HOST[:SLOTS],...}"; shift 2 ;;
    --hostfile) hostfile="${2:?--hostfile needs a file}"; shift 2 ;;
    --np) np="${2:?--np needs a number}"; shift 2 ;;
    --map-by) map_by="${2:?--map-by needs a placement}"; shift 2 ;;
    --bind-to) bind_to="${2:?--bind-to needs none, core, socket or numa}"; shift 2 ;;
    --iface) iface="${2:?--iface needs an interface name or subnet}"; shift 2 ;;
    --env) forward+=("${2:?--env needs NAME or NAME=VALUE}"); shift 2 ;;
    --oversubscribe) oversubscribe=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[ -n "$hosts" ] || [ -n "$hostfile" ] || die "name the hosts: --hosts HOST:SLOTS,... or --hostfile FILE"
[ -z "$hosts" ] || [ -z "$hostfile" ] || die "--hosts and --hostfile exclude each other"

work="$(mktemp -d "${TMPDIR:-/tmp}/run-hosts.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The hostfile, and the total number of slots in it.
if [ -n "$hosts" ]; then
  hostfile="$work/hostfile"
  IFS=, read -r -a entries <<<"$hosts"
  for entry in "${entries[@]}"; do
    host="${entry%%:*}" slots=1
    [ "$host" = "$entry" ] || slots="${entry#*:}"
    [[ "$host" =~ ^[A-Za-z0-9._-]+$ ]] || die "--hosts: '$host' is not a host name"
    [[ "$slots" =~ ^[1-9][0-9]*$ ]] || die "--hosts: '$entry': slots must be a positive number"
    printf '%s slots=%s\n' "$host" "$slots"
  done >"$hostfile"
fi
[ -r "$hostfile" ] || die "cannot read the hostfile $hostfile"
total_slots=0 host_count=0
while read -r host rest; do
  host="${host%%#*}"
  [ -n "$host" ] || continue
  slots=1
  if [[ "$rest" =~ slots=([0-9]+) ]]; then slots="${BASH_REMATCH[1]}"; fi
  total_slots=$((total_slots + slots)) host_count=$((host_count + 1))
done <"$hostfile"
[ "$host_count" -gt 0 ] || die "the hostfile $hostfile names no host"
np="${np:-$total_slots}"
[[ "$np" =~ ^[1-9][0-9]*$ ]] || die "--np '$np': expected a positive number"
if [ "$np" -gt "$total_slots" ] && [ "$oversubscribe" -eq 0 ]; then
  die "--np $np but the hosts have $total_slots slots (add slots, or --oversubscribe)"
fi

# The program: ringtrain train by default; --expect-world-size for ringtrain train.
if [ $# -eq 0 ]; then
  program="$here/ringtrain"
  [ -x "$program" ] || program="$(command -v ringtrain || true)"
  [ -n "$program" ] || program="$here/../../build/bin/ringtrain"
  set -- "$program" train
fi
if [ "$(basename "$1")" = ringtrain ] && [ "${2:-}" = train ] && ! printf '%s\n' "$@" | grep -q '^--expect-world-size'; then
  set -- "$@" --expect-world-size "$np"
fi

command=(mpirun -np "$np" --hostfile "$hostfile" --map-by "$map_by" --bind-to "$bind_to")
[ "$oversubscribe" -eq 0 ] || command+=(--oversubscribe)
if [ -n "$iface" ]; then
  command+=(--mca btl_tcp_if_include "$iface" --mca oob_tcp_if_include "$iface")
  # NCCL takes interface names (or prefixes), not subnets.
  [[ "$iface" == */* ]] || export NCCL_SOCKET_IFNAME="$iface"
fi
# ssh gives the remote ranks a bare environment: forward what ringtrain, NCCL, CUDA and OpenMP
# read. (Open MPI forwards OMPI_MCA_* itself.)
for name in PATH LD_LIBRARY_PATH $(compgen -e | grep -E '^(RINGTRAIN|NCCL|CUDA|OMP)_' || true); do
  [ -z "${!name+set}" ] || command+=(-x "$name")
done
for item in "${forward[@]}"; do
  [[ "${item%%=*}" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "--env '$item': expected NAME or NAME=VALUE"
  command+=(-x "$item")
done
# shellcheck disable=SC2206  # MPIRUN_ARGS is a list of words on purpose
[ -z "${MPIRUN_ARGS:-}" ] || command+=(${MPIRUN_ARGS})
command+=("$@")

if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
say "$np rank(s) on $host_count host(s) ($total_slots slots), map-by $map_by, bind-to $bind_to${iface:+, network $iface}"
if [ "$dry_run" -eq 1 ]; then
  sed 's/^/[run-hosts] hostfile: /' "$hostfile" >&2
  printf '%q ' "${command[@]}"
  printf '\n'
  exit 0
fi
# Not exec: the trap removes the generated hostfile after mpirun ends.
status=0
"${command[@]}" || status=$?
exit "$status"
