# shellcheck shell=bash disable=SC2034  # job_status, job_seconds, job_pid are for the caller
# Helpers of the end-to-end resilience tests (sourced): start an mpirun job in the background,
# find its ranks, wait for it with a bound, and make sure nothing is left behind. Every process is
# addressed by the id it got when this script started it (or as a child of one), never by name.

# The ranks of the mpirun with id $1: its ringtrain children, lowest id first.
ranks_of() { pgrep -P "$1" -x ringtrain | sort -n; }

# wait_for_file FILE SECONDS: 0 once FILE exists, 1 after SECONDS without it.
wait_for_file() {
  local deadline=$((SECONDS + $2))
  while [ ! -e "$1" ]; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.05
  done
}

# wait_for_line FILE PATTERN SECONDS: 0 once FILE has a line matching PATTERN.
wait_for_line() {
  local deadline=$((SECONDS + $3))
  until grep -q -E "$2" "$1" 2>/dev/null; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.05
  done
}

# wait_bounded PID SECONDS: waits for the background job PID at most SECONDS; sets job_status
# (124 after the bound, when the job is killed with its ranks) and job_seconds (with tenths).
wait_bounded() {
  local pid="$1" limit="$2" start
  start=$(date +%s%N)
  while kill -0 "$pid" 2>/dev/null; do
    if [ $((($(date +%s%N) - start) / 1000000000)) -ge "$limit" ]; then
      kill_job "$pid"
      job_status=124
      job_seconds=$limit
      return
    fi
    sleep 0.05
  done
  wait "$pid"
  job_status=$?
  job_seconds=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.1f", ns / 1e9 }')
}

# kill_job PID: SIGKILL to an mpirun this script started and to its ranks.
kill_job() {
  local rank
  for rank in $(ranks_of "$1"); do kill -9 "$rank" 2>/dev/null; done
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

# alive PID: the process exists and is not a zombie.
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }

# gone_within SECONDS PID...: 0 once none of the processes is alive (a killed rank may take a
# moment to be reaped after mpirun has returned).
gone_within() {
  local deadline=$((SECONDS + $1)) pid
  shift
  for pid in "$@"; do
    while alive "$pid"; do
      [ "$SECONDS" -ge "$deadline" ] && return 1
      sleep 0.05
    done
  done
}

# Jobs started with start_job are killed at exit, should a check fail half-way.
started_jobs=()
start_job() {  # start_job LOG COMMAND...: sets job_pid
  local log="$1"
  shift
  "$@" >"$log" 2>&1 &
  job_pid=$!
  started_jobs+=("$job_pid")
}
cleanup_jobs() {
  local pid
  for pid in "${started_jobs[@]}"; do
    kill -0 "$pid" 2>/dev/null && kill_job "$pid"
  done
}

failures=0
check() {  # check DESCRIPTION CONDITION...: runs the condition, counts a failure
  local what="$1"
  shift
  if "$@"; then
    echo "ok   $what"
  else
    echo "FAIL $what"
    failures=$((failures + 1))
  fi
}

# The step a checkpoint file name stands for: ckpt-00000125.h5 -> 125.
step_of() { local name="${1##*ckpt-}"; name="${name%.h5}"; echo $((10#$name)); }

# The newest checkpoint file of a folder.
newest_checkpoint() { find "$1" -maxdepth 1 -name 'ckpt-*.h5' | sort | tail -n 1; }

# The fingerprint of a run's final parameters, from its log.
fingerprint_in() { sed -n 's/.*parameters after step [0-9]*: fingerprint \([0-9a-f]*\).*/\1/p' "$1"; }
