#!/usr/bin/env bash
# A named operation that some ranks never submit: on 3 ranks rank 0 and 2 all-reduce "lonely"
# and rank 1 does not. With RINGTRAIN_STALL_TIMEOUT=2 the job must end, non-zero, within seconds,
# naming the operation, the ranks that submitted it and the one that did not. SKIP (77) without
# python3-torch.
#   torch_horovod_stall_test.sh BUILD_DIR PYTHON MPIEXEC [MPIEXEC_FLAGS...]
set -uo pipefail
build="${1:?usage: torch_horovod_stall_test.sh BUILD_DIR PYTHON MPIEXEC [FLAGS...]}"
python="${2:?}"
mpiexec="${3:?}"
shift 3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../support/checks.sh
source "$here/../support/checks.sh"
"$python" -c 'import torch' 2>/dev/null || { echo "SKIP: needs python3-torch"; exit 77; }
export PYTHONPATH="$build/python" OMP_NUM_THREADS=1 RINGTRAIN_STALL_TIMEOUT=2

script='
import time, torch, ringtrain.torch as hvd
hvd.init()
if hvd.rank() != 1:
    hvd.allreduce(torch.ones(4), name="lonely")
else:
    time.sleep(60)
'
start=$(date +%s)
output="$(timeout 50 "$mpiexec" -np 3 -x RINGTRAIN_STALL_TIMEOUT -x PYTHONPATH -x OMP_NUM_THREADS "$@" \
  "$python" -c "$script" 2>&1)"
status=$?
took=$(($(date +%s) - start))
if [ "$status" -ne 0 ] && [ "$status" -ne 124 ]; then ok "the job ends non-zero ($status)"; else fail "exit status $status" "$output"; fi
if [ "$took" -lt 40 ]; then ok "within seconds ($took s)"; else fail "took $took s" "$output"; fi
check "the stall names the operation and the ranks" "$output" \
  "stall: allreduce 'lonely' was submitted by rank(s) 0, 2" "for rank(s) 1"
echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
