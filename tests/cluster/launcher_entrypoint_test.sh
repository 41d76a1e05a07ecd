#!/usr/bin/env bash
# k8s/launcher-entrypoint.sh against hostfiles of local hosts: 127.0.0.1 and localhost, with the
# "SSH port" pointed at a TCP listener this test starts (no sshd needed: the entrypoint only
# checks that the port accepts connections).
#   launcher_entrypoint_test.sh PYTHON
# Cases: both hostfile formats run the command; a listener that comes up late is waited for; a
# port nobody listens on makes the entrypoint give up within its bound with one line naming the
# host; a host that never resolves (in an isolated network namespace, so no DNS query leaves the
# machine) likewise; a missing hostfile is named.
set -uo pipefail
python="${1:-python3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
entrypoint="$root/k8s/launcher-entrypoint.sh"
work="$(mktemp -d)"
listener_pid=""
trap '[ -z "$listener_pid" ] || kill "$listener_pid" 2>/dev/null; rm -rf "$work"' EXIT
failures=0 passes=0

# free_port: a TCP port on 127.0.0.1 that nothing listens on (bound, then released).
free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# listen PORT DELAY: accept connections on 127.0.0.1:PORT after DELAY seconds, for 30 s at most.
listen() {
  "$python" -c '
import socket, sys, time
time.sleep(float(sys.argv[2]))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
s.settimeout(0.5)
end = time.time() + 30
while time.time() < end:
    try:
        s.accept()[0].close()
    except socket.timeout:
        pass
' "$1" "$2" &
  listener_pid=$!
}
stop_listener() {
  kill "$listener_pid" 2>/dev/null
  wait "$listener_pid" 2>/dev/null
  listener_pid=""
}

indent() { while IFS= read -r line; do printf '     | %s\n' "$line"; done; }

# run NAME WANT_STATUS MAX_SECONDS PATTERN [ENV...]: runs the entrypoint with the environment
# assignments ENV and the command `echo command-ran`; checks status, time and one output line.
run() {
  local name="$1" want="$2" max="$3" pattern="$4"
  shift 4
  local start=$SECONDS output status elapsed
  output="$(env "$@" timeout 60 bash "$entrypoint" echo command-ran 2>&1)"
  status=$?
  elapsed=$((SECONDS - start))
  if [ "$status" -eq "$want" ] && [ "$elapsed" -le "$max" ] && grep -qE -- "$pattern" <<<"$output" &&
    { [ "$want" -eq 0 ] || ! grep -q command-ran <<<"$output"; }; then
    echo "ok   $name (${elapsed} s): $(grep -m1 -E -- "$pattern" <<<"$output")"
    passes=$((passes + 1))
  else
    echo "FAIL $name: status $status (want $want) after ${elapsed} s (at most $max), want /$pattern/"
    indent <<<"$output"
    failures=$((failures + 1))
  fi
}

port="$(free_port)"
mkdir -p "$work/bin"
printf '# written by the MPI operator\n127.0.0.1 slots=2\nlocalhost slots=2\n\n' >"$work/openmpi-hostfile"
printf '127.0.0.1:2\nlocalhost:2\n' >"$work/intel-hostfile"

listen "$port" 0
sleep 0.3
run "Open MPI hostfile, both hosts listening" 0 5 "^command-ran$" \
  RINGTRAIN_HOSTFILE="$work/openmpi-hostfile" RINGTRAIN_SSH_PORT="$port" RINGTRAIN_WAIT_SECONDS=10
run "Intel MPI / MPICH hostfile (host:slots)" 0 5 "all 2 hosts accept SSH" \
  RINGTRAIN_HOSTFILE="$work/intel-hostfile" RINGTRAIN_SSH_PORT="$port" RINGTRAIN_WAIT_SECONDS=10
stop_listener

listen "$port" 2
run "a worker whose sshd comes up 2 s late is waited for" 0 8 "^command-ran$" \
  RINGTRAIN_HOSTFILE="$work/openmpi-hostfile" RINGTRAIN_SSH_PORT="$port" RINGTRAIN_WAIT_SECONDS=20
stop_listener

closed="$(free_port)"
run "nobody listens: gives up within the bound, naming the host" 1 8 \
  "^\[launcher\] error: host 127\.0\.0\.1 \(127\.0\.0\.1\) did not accept SSH connections on port $closed within 3 s" \
  RINGTRAIN_HOSTFILE="$work/openmpi-hostfile" RINGTRAIN_SSH_PORT="$closed" RINGTRAIN_WAIT_SECONDS=3

# SIGTERM to the launcher (Kubernetes stopping the pod) reaches its command; a command that ends
# as Open MPI 4.1's mpirun does (status 1 after rank 0 logged its SIGTERM stop) makes the
# launcher exit with the status rank 0 logged, 143, as the ranks did.
cat >"$work/fake-mpirun" <<'FAKE'
#!/usr/bin/env bash
trap 'echo "stopped by SIGTERM after step 7; rerun with --resume auto to continue; exit status 143"; exit 1' TERM
echo command-ran
while :; do sleep 0.1; done
FAKE
chmod +x "$work/fake-mpirun"
listen "$port" 0
sleep 0.3
RINGTRAIN_HOSTFILE="$work/openmpi-hostfile" RINGTRAIN_SSH_PORT="$port" RINGTRAIN_WAIT_SECONDS=10 \
  bash "$entrypoint" "$work/fake-mpirun" >"$work/sigterm.log" 2>&1 &
launcher=$!
for _ in $(seq 100); do grep -q command-ran "$work/sigterm.log" && break; sleep 0.1; done
kill -TERM "$launcher"
wait "$launcher"
status=$?
stop_listener
if [ "$status" -eq 143 ] && grep -q "stopped by SIGTERM after step 7" "$work/sigterm.log"; then
  echo "ok   SIGTERM to the launcher: the command stopped and the launcher exited 143"
  passes=$((passes + 1))
else
  echo "FAIL SIGTERM to the launcher: status $status (want 143)"
  indent <"$work/sigterm.log"
  failures=$((failures + 1))
fi

# The rank count comes from the hostfile: mpirun without -np gets the slots (2 + 2), the ranks
# the expected world size, and the pod's NCCL_*/RINGTRAIN_* variables are forwarded (-x for Open
# MPI, -genvlist for MPICH's hydra). The stand-ins print their version, or their arguments.
for flavour in "mpirun:mpirun (Open MPI) 4.1.4" "mpiexec:HYDRA build details:"; do
  name="${flavour%%:*}"
  # shellcheck disable=SC2016  # $1, $* and the variable belong to the stand-in
  printf '#!/usr/bin/env bash\n[ "$1" != --version ] || { echo "%s"; exit 0; }\necho "args: $*"\necho "world: $RINGTRAIN_EXPECT_WORLD_SIZE"\n' \
    "${flavour#*:}" >"$work/bin/$name"
  chmod +x "$work/bin/$name"
done
listen "$port" 0
sleep 0.3
launch() {
  env PATH="$work/bin:$PATH" RINGTRAIN_HOSTFILE="$work/openmpi-hostfile" RINGTRAIN_SSH_PORT="$port" \
    RINGTRAIN_WAIT_SECONDS=10 NCCL_DEBUG=INFO RINGTRAIN_BATCH_SIZE=16 "$@" 2>&1
}
# expect NAME OUTPUT PATTERN...: every extended regex PATTERN matches a line of OUTPUT.
expect() {
  local name="$1" output="$2" pattern
  shift 2
  for pattern in "$@"; do
    if ! grep -qE -- "$pattern" <<<"$output"; then
      echo "FAIL $name: no /$pattern/"
      indent <<<"$output"
      failures=$((failures + 1))
      return
    fi
  done
  echo "ok   $name"
  passes=$((passes + 1))
}
output="$(launch bash "$entrypoint" mpirun ringtrain train --epochs 1)"
expect "Open MPI: -np from the hostfile's slots, NCCL_*/RINGTRAIN_* forwarded with -x" "$output" \
  "^args: -np 4 .*-x NCCL_DEBUG" "-x RINGTRAIN_BATCH_SIZE" "-x RINGTRAIN_EXPECT_WORLD_SIZE .*ringtrain train --epochs 1$" \
  "^world: 4$"
if grep -q -- "-x RINGTRAIN_SSH_PORT" <<<"$output"; then
  echo "FAIL the launcher's own variables are forwarded to the ranks"
  failures=$((failures + 1))
fi
output="$(launch bash "$entrypoint" mpirun -np 2 ringtrain train)"
expect "an explicit -np is kept and is the expected world size" "$output" "^args: -np 2 ringtrain train$|^args: -x .* -np 2 ringtrain train$" "^world: 2$"
output="$(launch bash "$entrypoint" mpirun --map-by slot sh -c 'echo hi' -n)"
expect "the program's own -c and -n are not mpirun's -np" "$output" "^args: -np 4 .*--map-by slot sh -c" "^world: 4$"
output="$(launch bash "$entrypoint" mpiexec ringtrain train)"
expect "MPICH's mpiexec: -np from the slots, -genvlist for the variables" "$output" \
  "^args: -np 4 -genvlist ([A-Z_]+,)*NCCL_DEBUG" "RINGTRAIN_BATCH_SIZE" "^world: 4$"
stop_listener
printf 'worker-0 slots=two\n' >"$work/bad-slots-hostfile"
run "a hostfile line with bad slots is named" 1 2 "error: the hostfile .* gives host worker-0 'two' slots" \
  RINGTRAIN_HOSTFILE="$work/bad-slots-hostfile"

run "a missing hostfile is named" 1 2 "error: cannot read the hostfile $work/none" \
  RINGTRAIN_HOSTFILE="$work/none"

# An unresolvable name: only inside a network namespace of its own (loopback only, no resolver
# reachable), so the lookup fails here at once instead of asking a DNS server outside.
printf 'worker-0.never-resolves.invalid slots=1\n' >"$work/unresolvable-hostfile"
if unshare --net true 2>/dev/null; then
  start=$SECONDS
  output="$(RINGTRAIN_HOSTFILE="$work/unresolvable-hostfile" RINGTRAIN_WAIT_SECONDS=2 \
    timeout 60 unshare --net bash "$entrypoint" echo command-ran 2>&1)"
  status=$?
  if [ "$status" -eq 1 ] && [ $((SECONDS - start)) -le 8 ] &&
    grep -q "error: host worker-0.never-resolves.invalid did not resolve within 2 s" <<<"$output"; then
    echo "ok   a host that never resolves: $(grep error: <<<"$output")"
    passes=$((passes + 1))
  else
    echo "FAIL a host that never resolves: status $status after $((SECONDS - start)) s"
    indent <<<"$output"
    failures=$((failures + 1))
  fi
else
  echo "skip a host that never resolves: unshare --net is not permitted here"
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
