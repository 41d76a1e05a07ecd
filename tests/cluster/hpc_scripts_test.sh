#!/usr/bin/env bash
# The HPC launch scripts of scripts/mpirun/: syntax and shellcheck of every cluster script;
# run_hosts.sh's command line (dry run), its refusals, and real runs on this machine's localhost
# and across two namespaced hosts (where network namespaces can be made), with the environment
# forwarded through the cluster's ssh stand-in; the Slurm script's srun and mpirun command lines
# from a faked allocation (Slurm itself cannot run here: no slurmctld, no slurmd).
#   hpc_scripts_test.sh BIN_DIR
set -uo pipefail
bin="${1:?usage: hpc_scripts_test.sh BIN_DIR}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
run_hosts="$root/scripts/mpirun/run_hosts.sh"
slurm="$root/scripts/mpirun/slurm_train.sbatch"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/support/checks.sh
source "$root/tests/support/checks.sh"

# 1. Syntax and shellcheck of every shell script of the cluster and GPU-machine work.
scripts=("$root"/scripts/mpirun/*.sh "$slurm" "$root"/scripts/lib/forward_sigterm.sh "$root"/k8s/*.sh
  "$root"/scripts/gpu/*.sh
  "$root"/tests/cluster/*.sh)
for script in "${scripts[@]}"; do
  bash -n "$script" || fail "bash -n $script"
done
ok "bash -n: ${#scripts[@]} scripts"
if command -v shellcheck >/dev/null 2>&1; then
  if output="$(cd "$root" && shellcheck -x -P SCRIPTDIR "${scripts[@]}" 2>&1)"; then ok "shellcheck: ${#scripts[@]} scripts"; else fail "shellcheck" "$output"; fi
else
  echo "skip shellcheck: not installed (apt-get install shellcheck)"
fi

# 2. run_hosts.sh builds the command line it should.
output="$(RINGTRAIN_BATCH_SIZE=16 "$run_hosts" --hosts gpu01:4,gpu02:4 --iface ib0 --env NCCL_DEBUG=INFO --dry-run \
  -- /opt/ringtrain/bin/ringtrain train --data /shared/mnist 2>&1)"
check "run_hosts.sh --dry-run: ranks from the slots, placement, network, environment, world size" "$output" \
  "mpirun -np 8 --hostfile" "--map-by slot --bind-to none" "--mca btl_tcp_if_include ib0" \
  "--mca oob_tcp_if_include ib0" "-x NCCL_SOCKET_IFNAME" "-x RINGTRAIN_BATCH_SIZE" "-x NCCL_DEBUG=INFO" \
  "-x PATH" "train --data /shared/mnist --expect-world-size 8" "hostfile: gpu01 slots=4" "hostfile: gpu02 slots=4"
output="$("$run_hosts" --hostfile "$root/scripts/mpirun/hostfile.example" --np 6 --map-by ppr:1:socket:PE=8 \
  --bind-to core --dry-run -- ringtrain train --expect-world-size 6 2>&1)"
check "run_hosts.sh --dry-run with hostfile.example, --np and CPU binding" "$output" \
  "mpirun -np 6 --hostfile $root/scripts/mpirun/hostfile.example --map-by ppr:1:socket:PE=8 --bind-to core" \
  "2 host(s) (8 slots)"
if grep -c -- "--expect-world-size" <<<"$output" | grep -qx 1; then ok "run_hosts.sh keeps a given --expect-world-size"; else fail "run_hosts.sh added a second --expect-world-size" "$output"; fi

refused() {
  local name="$1" pattern="$2" output status
  shift 2
  output="$("$run_hosts" "$@" --dry-run -- true 2>&1)"
  status=$?
  if [ "$status" -eq 2 ] && grep -qF -- "$pattern" <<<"$output"; then ok "refused: $name"; else fail "$name: status $status, want 2 and '$pattern'" "$output"; fi
}
refused "more ranks than slots" "--np 5 but the hosts have 4 slots" --hosts a:2,b:2 --np 5
refused "no hosts" "name the hosts" --np 2
refused "a bad slot count" "slots must be a positive number" --hosts a:x
refused "a missing hostfile" "cannot read the hostfile $work/none" --hostfile "$work/none"

# 3. A real run on localhost: two ranks, the batch size forwarded as RINGTRAIN_BATCH_SIZE.
output="$(RINGTRAIN_BATCH_SIZE=16 timeout 120 "$run_hosts" --hosts localhost:2 -- \
  "$bin/ringtrain" train --synthetic --steps 5 --log-every 0 2>&1)"
check "run_hosts.sh on localhost:2 trains on 2 ranks with the forwarded batch size" "$output" \
  "2 rank(s) on 1 node(s)" "batch 16/rank" "replicas identical"

# 4. Across two namespaced hosts, each reached through the cluster's ssh stand-in, which starts
# the ranks with a bare environment as sshd would: the batch size arrives only if forwarded.
if [ "$(id -u)" -eq 0 ] && "$root/scripts/mpirun/netns_cluster.sh" --check >/dev/null 2>&1; then
  output="$(RINGTRAIN_BATCH_SIZE=24 timeout 240 "$root/scripts/mpirun/netns_cluster.sh" --hosts 2 -- \
    "$run_hosts" --hosts node0:1,node1:1 --iface 10.250.0.0/24 -- \
    "$bin/ringtrain" train --synthetic --steps 5 --log-every 0 2>&1)"
  check "run_hosts.sh across 2 namespaced hosts" "$output" \
    "2 rank(s) on 2 node(s)" "[rank 0/2 node0]" "batch 24/rank" "replicas identical"
else
  echo "skip run_hosts.sh across namespaced hosts: needs root and network namespaces"
fi

# 5. The Slurm script's two launch commands from a faked allocation of 2 nodes x 4 tasks.
slurm_env=(SLURM_NTASKS=8 SLURM_JOB_NUM_NODES=2 "SLURM_NTASKS_PER_NODE=4(x2)" SLURM_CPUS_PER_TASK=8
  SLURM_JOB_NAME=mnist SLURM_SUBMIT_DIR=/shared/ringtrain RINGTRAIN_BIN=/opt/ringtrain/bin/ringtrain
  RINGTRAIN_IFACE=ib0 RINGTRAIN_DRY_RUN=1)
output="$(env "${slurm_env[@]}" bash "$slurm" --data /shared/mnist 2>&1)"
check "slurm_train.sbatch, srun variant" "$output" \
  "srun --mpi=pmix --ntasks=8 --ntasks-per-node=4 --cpus-per-task=8 --distribution=block:block --cpu-bind=cores" \
  "/opt/ringtrain/bin/ringtrain train --expect-world-size 8" \
  "--checkpoint-dir /shared/ringtrain/runs/checkpoints/mnist --resume auto" "--data /shared/mnist"
output="$(env "${slurm_env[@]}" RINGTRAIN_LAUNCH=mpirun bash "$slurm" --data /shared/mnist 2>&1)"
check "slurm_train.sbatch, mpirun variant" "$output" \
  "mpirun -np 8 --map-by ppr:4:node:PE=8 --bind-to core" "-x NCCL_SOCKET_IFNAME" \
  "ringtrain train --expect-world-size 8"
output="$(env "${slurm_env[@]}" SLURM_SUBMIT_DIR="$root" RINGTRAIN_LAUNCH=mpirun bash "$slurm" 2>&1)"
check "slurm_train.sbatch runs mpirun through forward_sigterm.sh (a SIGTERM stop exits 143)" "$output" \
  "$root/scripts/lib/forward_sigterm.sh mpirun -np 8"
output="$(env -u SLURM_JOB_ID bash "$slurm" 2>&1)"
status=$?
if [ "$status" -eq 2 ] && grep -q "not inside a Slurm job" <<<"$output"; then ok "slurm_train.sbatch outside Slurm says so"; else fail "slurm_train.sbatch outside Slurm: status $status" "$output"; fi
for directive in "--ntasks-per-node=4" "--gpus-per-node=4" "--signal=TERM@120" "--requeue"; do
  grep -q "^#SBATCH $directive" "$slurm" || fail "slurm_train.sbatch lacks #SBATCH $directive"
done
ok "slurm_train.sbatch: one task per GPU, SIGTERM before the limit, requeue"
# The script requeues the job itself when the ranks stop for SIGTERM (143), and only then:
# Slurm's --requeue does not restart a job that ends by itself. srun and scontrol are stand-ins
# that exit with the status asked for and record their arguments.
mkdir -p "$work/fake-slurm"
# shellcheck disable=SC2016  # $* and FAKE_SRUN_STATUS belong to the stand-ins
printf '#!/bin/sh\necho "srun $*" >>"%s/calls"\nexit "${FAKE_SRUN_STATUS:-0}"\n' "$work" >"$work/fake-slurm/srun"
# shellcheck disable=SC2016
printf '#!/bin/sh\necho "scontrol $*" >>"%s/calls"\n' "$work" >"$work/fake-slurm/scontrol"
chmod +x "$work/fake-slurm/srun" "$work/fake-slurm/scontrol"
fake_job=(PATH="$work/fake-slurm:$PATH" SLURM_JOB_ID=4242 SLURM_NTASKS=2 SLURM_JOB_NUM_NODES=1
  SLURM_SUBMIT_DIR="$work" RINGTRAIN_BIN=/opt/ringtrain/bin/ringtrain RINGTRAIN_WORKDIR="$work/runs")
for case in "143 0 scontrol requeue 4242" "1 1 -" "0 0 -"; do
  read -r srun_status want_status want_call <<<"$case"
  rm -f "$work/calls"
  output="$(env "${fake_job[@]}" FAKE_SRUN_STATUS="$srun_status" bash "$slurm" --data /shared/mnist 2>&1)"
  status=$?
  calls="$(cat "$work/calls" 2>/dev/null)"
  if [ "$want_call" = - ]; then
    if [ "$status" -eq "$want_status" ] && ! grep -q scontrol <<<"$calls"; then
      ok "slurm_train.sbatch: ranks exit $srun_status -> job exits $want_status, not requeued"
    else fail "slurm_train.sbatch: ranks exit $srun_status: status $status, calls: $calls" "$output"; fi
  else
    if [ "$status" -eq "$want_status" ] && grep -qx "$want_call" <<<"$calls" && grep -q "requeueing job 4242" <<<"$output"; then
      ok "slurm_train.sbatch: ranks exit 143 (time limit) -> scontrol requeue 4242"
    else fail "slurm_train.sbatch: ranks exit 143: status $status, calls: $calls" "$output"; fi
  fi
done
rm -f "$work/calls"
output="$(env "${fake_job[@]}" FAKE_SRUN_STATUS=143 RINGTRAIN_REQUEUE=0 bash "$slurm" 2>&1)"
status=$?
if [ "$status" -eq 143 ] && ! grep -q scontrol "$work/calls"; then ok "slurm_train.sbatch: RINGTRAIN_REQUEUE=0 ends the job with 143"; else fail "slurm_train.sbatch RINGTRAIN_REQUEUE=0: status $status" "$output"; fi
echo "Slurm itself was not run: no Slurm controller or daemons on this machine"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
