#!/usr/bin/env bash
# Open MPI only: its "ssh" for the namespace cluster of netns_cluster.sh (OMPI_MCA_plm_rsh_agent):
#   netns_rsh.sh HOST COMMAND...
# enters HOST's network namespace with its own host name (a UTS namespace) and runs COMMAND the
# way sshd would: the words joined into one line for `sh -c`, in a clean environment (PATH, HOME,
# USER, LANG) unless RINGTRAIN_NETNS_KEEP_ENV=1, so a job that forgets `mpirun -x NAME` fails
# here as it would on a real cluster. RINGTRAIN_NETNS_PREFIX names the cluster.
# The sanitizers' settings (ASAN_OPTIONS, LSAN_OPTIONS, UBSAN_OPTIONS), when set, go along like
# PATH: they belong to the build under test, not to the job. Without them the ranks of a sanitized
# build (scripts/test.sh --sanitize) ran with LeakSanitizer on, which reports Open MPI's own
# allocations and crashed in its tracer thread at exit in these namespaces.
set -euo pipefail
if [ $# -lt 2 ] || [ -z "${RINGTRAIN_NETNS_PREFIX:-}" ]; then
  echo "usage: RINGTRAIN_NETNS_PREFIX=rtPID netns_rsh.sh HOST COMMAND... (run by mpirun inside netns_cluster.sh)" >&2
  exit 255
fi
host="$1"
shift
namespace="$RINGTRAIN_NETNS_PREFIX-$host"
if ! ip netns pids "$namespace" >/dev/null 2>&1; then
  echo "netns_rsh.sh: no host '$host' in this cluster (namespace $namespace does not exist)" >&2
  exit 255
fi
environment=(env -i "PATH=$PATH" "HOME=${HOME:-/root}" "USER=${USER:-$(id -un)}" "LANG=${LANG:-C.UTF-8}")
for name in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do
  [ -z "${!name:-}" ] || environment+=("$name=${!name}")
done
[ "${RINGTRAIN_NETNS_KEEP_ENV:-0}" != 1 ] || environment=(env)
# shellcheck disable=SC2016  # $1 and $* belong to the inner shell.
# $1 of the inner script is the host name; the rest is the command line sshd would have run.
exec ip netns exec "$namespace" unshare --uts "${environment[@]}" sh -c \
  'echo "$1" >/proc/sys/kernel/hostname && shift && exec sh -c "$*"' netns_rsh "$host" "$@"
