#!/usr/bin/env bash
# ringtrain across 2 hosts x 2 ranks over real TCP: each host a network namespace built by
# scripts/mpirun/netns_cluster.sh. Skipped (exit 77) where namespaces cannot be made.
#   netns_cluster_test.sh BIN_DIR
# Checks: synthetic training sees 4 ranks on 2 nodes, keeps the replicas identical and moves its
# gradients through the hosts' links; linear regression learns y = 2x + 10 with the mpi backend;
# a filtered run of the collectives MPI tests passes; --expect-world-size refuses a wrong rank
# count, and --backend shm ranks on two hosts; SIGTERM to the cluster script ends the job and
# removes every namespace; and the hosts' environment holds the sanitizers' settings but not a
# variable the job did not forward.
set -uo pipefail
bin="${1:?usage: netns_cluster_test.sh BIN_DIR}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cluster="$root/scripts/mpirun/netns_cluster.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0 passes=0

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the namespace cluster needs root (network namespaces); running as $(id -un)"
  exit 77
fi
"$cluster" --check || { echo "SKIP: network namespaces cannot be made here (see the line above)"; exit 77; }

ok() {
  echo "ok   $1"
  passes=$((passes + 1))
}
fail() {
  echo "FAIL $1"
  [ -f "$2" ] && sed 's/^/     | /' "$2" | tail -40
  failures=$((failures + 1))
}
# expect NAME LOG PATTERN...: every extended regular expression PATTERN occurs in LOG.
expect() {
  local name="$1" log="$2" pattern
  shift 2
  for pattern in "$@"; do
    if ! grep -qE -- "$pattern" "$log"; then
      fail "$name: no line matches /$pattern/" "$log"
      return
    fi
  done
  ok "$name"
}
# link_mib LOG HOST: MiB that HOST's link sent, from the cluster script's closing lines.
link_mib() { sed -n "s/.*$2 link: sent \([0-9]*\) MiB.*/\1/p" "$1"; }

# 1. Synthetic training, ring backend: 2 nodes, identical replicas, gradients over the links.
# 50 steps x 2.7 MB of gradients; the ring sends 2(n-1)/n of it per rank and one rank per host
# crosses the link: at least 50 x 2.7 x 1.5 / 1.05 MiB ~ 190 MiB per host.
log="$work/synthetic.log"
timeout 240 "$cluster" --hosts 2 --slots 2 -- \
  mpirun -np 4 "$bin/ringtrain" train --synthetic --steps 50 --log-every 0 --expect-world-size 4 >"$log" 2>&1
status=$?
if [ "$status" -ne 0 ]; then
  fail "synthetic training on 2 hosts x 2 ranks: exit status $status" "$log"
else
  expect "synthetic training on 2 hosts x 2 ranks" "$log" \
    "4 rank\(s\) on 2 node\(s\)" "^\[rank 0/4 node0\]" "replicas identical"
  for host in node0 node1; do
    mib="$(link_mib "$log" "$host")"
    if [ "${mib:-0}" -ge 150 ]; then ok "$host's link carried the gradients ($mib MiB sent)"; else fail "$host's link sent only ${mib:-?} MiB (want >= 150)" "$log"; fi
  done
fi

# 2. A short MNIST-free run with the mpi backend: linear regression learns y = 2x + 10.
log="$work/linreg.log"
timeout 120 "$cluster" --hosts 2 --slots 2 -- \
  mpirun -np 4 "$bin/ringtrain" train --model linreg --epochs 3 --backend mpi --log-every 0 >"$log" 2>&1
status=$?
if [ "$status" -ne 0 ]; then
  fail "linear regression on 2 hosts x 2 ranks, mpi backend: exit status $status" "$log"
else
  expect "linear regression on 2 hosts x 2 ranks, mpi backend" "$log" \
    "learned y = (1\.9[5-9]|2\.0[0-4])[0-9]* x \+ (9\.9[5-9]|10\.0[0-5])" "replicas identical"
fi

# 3. The collectives MPI tests, a selection that takes seconds (the full suite runs locally under
# ctest): environment (minus the one-host test, false here by design), both backends' float32
# all-reduce, broadcast and all-gather, and the ring's mismatch detection.
filter='MpiEnvironmentTest.*:Backends/AllreduceTest.*ring_float32_sum*:Backends/AllreduceTest.*mpi_float32_sum*'
filter+=':Backends/BroadcastAllgatherTest.*float32*:RingBackends/MismatchTest.*'
filter+='-MpiEnvironmentTest.OnOneHostEveryRankIsOnTheSameNode'
log="$work/collectives.log"
timeout 240 "$cluster" --hosts 2 --slots 2 -- \
  mpirun -np 4 "$bin/collectives_mpi_tests" --gtest_filter="$filter" >"$log" 2>&1
status=$?
if [ "$status" -ne 0 ]; then
  fail "collectives MPI tests on 2 hosts x 2 ranks: exit status $status" "$log"
else
  expect "collectives MPI tests on 2 hosts x 2 ranks" "$log" "\[  PASSED  \] [1-9][0-9]* tests"
fi

# 4. A launcher that starts another number of ranks than the job expects is refused on every host.
log="$work/world-size.log"
timeout 60 "$cluster" --hosts 2 --slots 2 -- \
  mpirun -np 4 "$bin/ringtrain" train --synthetic --steps 5 --expect-world-size 8 >"$log" 2>&1
status=$?
if [ "$status" -eq 0 ]; then
  fail "--expect-world-size 8 with 4 ranks: the job ran" "$log"
else
  expect "--expect-world-size 8 with 4 ranks is refused (status $status)" "$log" \
    "error: --expect-world-size 8 but MPI started 4 rank\(s\)"
fi

# 4b. --backend shm across hosts: refused before any shared window, one line, status 2.
log="$work/shm-across-hosts.log"
timeout 60 "$cluster" --hosts 2 --slots 1 -- \
  mpirun -np 2 "$bin/ringtrain" train --synthetic --steps 5 --backend shm >"$log" 2>&1
status=$?
if [ "$status" -ne 2 ]; then
  fail "--backend shm on 2 hosts: exit status $status (want 2)" "$log"
else
  expect "--backend shm on 2 hosts is refused (status 2)" "$log" \
    "error: --backend shm needs every rank on one node, but the 2 ranks are on 2 nodes"
fi

# 5. SIGTERM to the cluster script mid-training: the job ends, and the namespaces and the ranks go.
log="$work/interrupted.log"
"$cluster" --hosts 2 --slots 1 -- \
  mpirun -np 2 "$bin/ringtrain" train --synthetic --steps 1000000 --log-every 0 --seed 7177 >"$log" 2>&1 &
script_pid=$!
for _ in $(seq 1 100); do
  grep -q "training mlp" "$log" && break
  sleep 0.2
done
prefix="rt$script_pid-"
before="$(ip netns list | grep -c "^$prefix")"
kill -TERM "$script_pid"
start=$SECONDS
wait "$script_pid"
status=$?
elapsed=$((SECONDS - start))
sleep 0.5
left_namespaces="$(ip netns list | grep -c "^$prefix")"
left_ranks="$(pgrep -f -- '--seed 7177' | wc -l)"
if [ "$before" -eq 4 ] && [ "$status" -eq 143 ] && [ "$elapsed" -le 15 ] && [ "$left_namespaces" -eq 0 ] &&
  [ "$left_ranks" -eq 0 ] && [ ! -e "/etc/netns/${prefix}node0" ]; then
  ok "SIGTERM mid-training: status 143 after $elapsed s, namespaces and ranks gone"
else
  fail "SIGTERM mid-training: $before namespaces before, status $status (want 143) after $elapsed s, $left_namespaces namespaces and $left_ranks ranks left" "$log"
fi

# 6. The hosts' environment is clean, as over ssh -- a variable the job did not forward with
# mpirun -x is not there -- except for the sanitizers' settings, which belong to the build under
# test (scripts/test.sh --sanitize turns LeakSanitizer off for MPI programs through them).
log="$work/environment.log"
# shellcheck disable=SC2016  # the ranks' shell expands them, on the hosts
RINGTRAIN_NETNS_PROBE=job UBSAN_OPTIONS=print_stacktrace=1 timeout 60 "$cluster" --hosts 2 --slots 1 -- \
  mpirun -np 2 sh -c 'echo "on $(hostname): probe ${RINGTRAIN_NETNS_PROBE:-unset}, ubsan ${UBSAN_OPTIONS:-unset}"' >"$log" 2>&1
status=$?
if [ "$status" -ne 0 ]; then
  fail "environment on the hosts: exit status $status" "$log"
else
  expect "environment on the hosts: the job's variable stays behind, the sanitizers' goes along" \
    "$log" "^on node0: probe unset, ubsan print_stacktrace=1$" "^on node1: probe unset, ubsan print_stacktrace=1$"
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
