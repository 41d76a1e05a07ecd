#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
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
# --map-by slot (the default) fills each host's slots before the next one, so ranks 0..S-1 are
# host 1's and the node-local rank picks the GPU; ppr:1:socket:PE=8 etc. suit CPU jobs.
# --iface names one network for all traffic: MPI's TCP byte-transfer and out-of-band layers
# (btl_tcp_if_include, oob_tcp_if_include) and NCCL (NCCL_SOCKET_IFNAME); a name (eth0, ib0) or a
# CIDR subnet (10.0.0.0/24; MPI only). Without it, as OMPI_MCA_* and NCCL_* variables already say,
# else MPI's own choice. Always forwarded to every rank besides --env's: PATH, LD_LIBRARY_PATH,
# and every RINGTRAIN_*, NCCL_*, CUDA_*, OMP_* variable set here (ssh starts the remote ranks
# with a bare environment).
# MPIRUN_ARGS adds mpirun options verbatim (word-split). As root, Open MPI's two run-as-root
# variables are set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# args.sh: the checkout's, or beside an installed copy (cmake --install puts this script in
# PREFIX/bin, args.sh in PREFIX/share/ringtrain/scripts/lib).
args_sh="$here/../lib/args.sh"
[ -f "$args_sh" ] || args_sh="$here/../share/ringtrain/scripts/lib/args.sh"
# shellcheck source=../lib/args.sh
source "$args_sh"
say() { printf '[run-hosts] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

ringtrain_opt --hosts hosts "" "HOST[:SLOTS],... (slots: ranks on that host, default 1; one per GPU)" nonempty
ringtrain_opt --hostfile hostfile "" "an Open MPI hostfile (\"HOST slots=N\" lines; see hostfile.example) instead" nonempty
ringtrain_opt --np np "" "number of ranks (default: all slots)" nonempty
ringtrain_opt --map-by map_by slot "rank placement (above)" nonempty
ringtrain_opt --bind-to bind_to none "none (GPUs: the CPU set follows from the GPU), core, socket, numa" nonempty
ringtrain_opt --iface iface "" "one network for all traffic (above)" nonempty
ringtrain_list --env forward_env "NAME[=VALUE]: forward NAME (set to VALUE) to every rank"
ringtrain_flag --oversubscribe oversubscribe "allow more ranks than slots (tests on a laptop)"
ringtrain_flag --dry-run dry_run "print the mpirun command line and the hostfile, run nothing"
ringtrain_rest program_args "PROGRAM [ARG...] (default: ringtrain train)" command
ringtrain_parse_args "$@"
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
set -- "${program_args[@]}"
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
for item in "${forward_env[@]}"; do
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
