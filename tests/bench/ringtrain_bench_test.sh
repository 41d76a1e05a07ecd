#!/usr/bin/env bash
# `ringtrain bench` under mpirun: resnet50 with the sleep stand-in on 2 and 3 ranks, every rank
# exits 0 and rank 0's JSON has the schema's fields with sane values (parameters the profile's
# sum of shapes, step p50 at least compute_ms); each host backend runs a step; bad input (unknown
# profile, a bad profile line, a negative --compute-ms) ends every rank with status 2 and one line.
#   ringtrain_bench_test.sh RINGTRAIN PROFILE-DIR MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
ringtrain="$1"
profiles="$2"
shift 2
mpirun=("$@")
work="$(mktemp -d)"
# shellcheck source=tests/support/tagged_ranks.sh
source "$(dirname "$0")/../support/tagged_ranks.sh"
export RINGTRAIN_TEST_TAG="ringtrain-bench-$$"
# The profiles come from beside the program unless a case below says otherwise.
unset RINGTRAIN_PROFILE_DIR
trap 'kill_own_ranks; rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# ranks NP ARGS...: runs `ringtrain bench ARGS` on NP ranks, each rank printing its exit status
# as "rank R exit S"; the output is in $work/out.
ranks() {
  local np="$1"
  shift
  # shellcheck disable=SC2016  # expanded by each rank's shell
  timeout 120 "${mpirun[@]}" -np "$np" bash -c \
    '"$0" bench "$@"; echo "rank $OMPI_COMM_WORLD_RANK exit $?"' "$ringtrain" "$@" \
    >"$work/out" 2>&1
}

# exits NP STATUS: every one of NP ranks reported STATUS.
exits() {
  local count
  count="$(grep -c -E "^rank [0-9]+ exit $2\$" "$work/out")"
  [ "$count" -eq "$1" ]
}

# 2 ranks with the bound of a 10 Gbit/s link (this machine's links are not shaped: the measured
# step may beat it), 3 unshaped (the bound is the compute, which the sleeps guarantee).
for np in 2 3; do
  json="$work/np$np.json"
  link=$((np == 2 ? 10 : 0))
  if ranks "$np" --profile resnet50 --stand-in sleep --compute-ms 30 --warmup-steps 1 \
    --chunks 3 --steps-per-chunk 2 --batch-size 32 --link-gbit "$link" --json "$json" &&
    exits "$np" 0; then
    echo "ok   $np ranks: every rank exited 0"
  else
    fail "$np ranks: not every rank exited 0"
    sed 's/^/     | /' "$work/out"
    continue
  fi
  grep -q "analytic bound on the step" "$work/out" || fail "$np ranks: no table on stdout"
  python3 - "$json" "$profiles/resnet50.txt" "$np" "$link" <<'PY' || fail "$np ranks: JSON"
import json, math, sys
r = json.load(open(sys.argv[1]))
np_, link = int(sys.argv[3]), int(sys.argv[4])
total = 0
for line in open(sys.argv[2]):
    if line.strip() and not line.startswith("#"):
        total += math.prod(int(d) for d in line.split()[1].split("x"))
checks = {
    "profile": r["profile"] == "resnet50",
    "ranks": r["ranks"] == np_,
    "parameters": r["parameters"] == total,
    "gradient_bytes": r["gradient_bytes"] == 4 * total,
    "backend": r["backend"] in ("shm", "ring", "mpi", "hierarchical"),
    "engine": set(r["engine"]) == {"overlap", "fusion_threshold_bytes", "compression"},
    "buckets": r["buckets"] >= -(-total * 4 // r["engine"]["fusion_threshold_bytes"]),
    "compute_ms": r["compute_ms"] == 30,
    "step p50 >= compute": r["step_ms"]["p50"] >= 30,
    "step p95 >= p50": r["step_ms"]["p95"] >= r["step_ms"]["p50"],
    # The mean of the chunks' rates is at least the rate of the mean step (Jensen; a chunk's
    # time is its steps' plus the loop's), and no chunk beats the compute every step sleeps.
    "steps/s": 0.95 * 1000 / r["step_ms"]["mean"] <= r["steps_per_s"]["per_rank_mean"]
               <= 1000 / 30,
    "samples/s": math.isclose(r["samples_per_s"]["per_rank_mean"],
                              32 * r["steps_per_s"]["per_rank_mean"])
                 and math.isclose(r["samples_per_s"]["total"],
                                  np_ * r["samples_per_s"]["per_rank_mean"])
                 and r["samples_per_s"]["per_rank_ci95"] >= 0,
    "exposed <= step": 0 <= r["exposed_communication_ms"]["mean"] <= r["step_ms"]["mean"],
    "fraction of bound": r["bound"]["fraction_of_bound"] > 0
                         and math.isclose(r["bound"]["fraction_of_bound"],
                                          r["bound"]["step_ms"] / r["step_ms"]["p50"]),
}
if link:
    comm = 2 * (np_ - 1) / np_ * 4 * total * 8 / (link * 1e9) * 1e3
    checks["shaped bound"] = (r["bound"]["link"] == "shaped" and r["bound"]["link_gbit"] == link
                              and math.isclose(r["bound"]["communication_ms"], comm)
                              and math.isclose(r["bound"]["step_ms"], max(30, comm)))
else:
    checks["unshaped bound"] = (r["bound"]["link"] == "unshaped" and r["bound"]["link_gbit"] is None
                                and r["bound"]["communication_ms"] is None
                                and r["bound"]["step_ms"] == 30
                                and r["bound"]["fraction_of_bound"] <= 1)
bad = [name for name, good in checks.items() if not good]
print(("FAIL JSON: " + ", ".join(bad)) if bad else "ok   JSON fields and values")
if bad:
    print(json.dumps(r, indent=1))
sys.exit(1 if bad else 0)
PY
done

# Each host backend, with overlap off and 16-bit compression where the backend sends messages;
# shm with the spinning stand-in (2 ranks: no more than the cores a CI machine has).
for backend in mpi ring hierarchical shm; do
  extra=(--compression fp16 --overlap off)
  [ "$backend" = shm ] && extra=(--overlap off --stand-in spin)
  if ranks 2 --profile resnet50 --compute-ms 10 --warmup-steps 0 --chunks 1 --steps-per-chunk 2 \
    --backend "$backend" "${extra[@]}" --json "$work/$backend.json" && exits 2 0 &&
    grep -q "\"backend\": \"$backend\"" "$work/$backend.json"; then
    echo "ok   --backend $backend ${extra[*]}"
  else
    fail "--backend $backend"
    sed 's/^/     | /' "$work/out"
  fi
done

# refused NAME PATTERN ARGS...: 2 ranks, each exits 2; the message appears once.
refused() {
  local name="$1" pattern="$2"
  shift 2
  ranks 2 "$@"
  local count
  count="$(grep -c -E "error: .*$pattern" "$work/out")"
  if exits 2 2 && [ "$count" -eq 1 ]; then
    echo "ok   $name: $(grep -m1 -E "error: .*$pattern" "$work/out")"
  else
    fail "$name: message seen $count times (want 1), or not every rank exited 2"
    sed 's/^/     | /' "$work/out"
  fi
}
printf 'fc.bias 1000 0\nfc.weight 1000x2048 4096000\nconv1.weight 64x3x7z7 1\n' >"$work/bad.txt"
refused "unknown profile" "--profile resnet5: no such profile .*known: .*resnet50" \
  --profile resnet5
refused "bad profile line" "profile $work/bad.txt line 3: shape '64x3x7z7'" \
  --profile "$work/bad.txt"
refused "missing profile file" "profile $work/none.txt: no such file" --profile "$work/none.txt"
mkfifo "$work/fifo.txt"
refused "a FIFO as the profile file" "profile $work/fifo.txt: is a FIFO \(named pipe\), not a regular file" \
  --profile "$work/fifo.txt"
refused "negative --compute-ms" "--compute-ms must be a finite number, at least 0" \
  --compute-ms -5
refused "bad --stand-in" "--stand-in 'nap': expected sleep or spin" --stand-in nap
refused "--backend nccl" "--backend nccl averages GPU buffers, and ringtrain bench averages host" \
  --backend nccl
refused "--json in no folder" "--json $work/none/r.json: no such folder" --json "$work/none/r.json"

# A copy of the program outside the build tree and the install prefix has no profiles beside it:
# the refusal says where it looked and names RINGTRAIN_PROFILE_DIR, which then serves the profiles.
mkdir -p "$work/outside/bin"
cp "$ringtrain" "$work/outside/bin/ringtrain"
built="$ringtrain"
ringtrain="$work/outside/bin/ringtrain"
unset RINGTRAIN_PROFILE_DIR
beside="$work/outside/share/ringtrain/profiles \(beside the program $ringtrain\)"
refused "program outside the build tree" \
  "--profile resnet50: looked in $beside: no such folder; set RINGTRAIN_PROFILE_DIR" \
  --profile resnet50
export RINGTRAIN_PROFILE_DIR="$work/nowhere"
refused "RINGTRAIN_PROFILE_DIR no folder" \
  "--profile resnet50: looked in $work/nowhere \(RINGTRAIN_PROFILE_DIR\): no such folder" \
  --profile resnet50
export RINGTRAIN_PROFILE_DIR="$profiles"
if ranks 2 --profile resnet50 --stand-in sleep --compute-ms 1 --warmup-steps 1 --chunks 1 \
  --steps-per-chunk 1 --batch-size 8 && exits 2 0; then
  echo "ok   RINGTRAIN_PROFILE_DIR serves the profiles to a program outside the build tree"
else
  fail "RINGTRAIN_PROFILE_DIR: not every rank exited 0"
  sed 's/^/     | /' "$work/out"
fi
unset RINGTRAIN_PROFILE_DIR
ringtrain="$built"

# The programs share the RINGTRAIN_* variables (main.cc registers every program's options): train's
# RINGTRAIN_EPOCHS and generate's RINGTRAIN_TOP_K are no misspelling here, RINGTRAIN_CHUNK is (once).
if RINGTRAIN_EPOCHS=3 RINGTRAIN_TOP_K=5 RINGTRAIN_CHUNK=2 ranks 2 --compute-ms 1 --warmup-steps 0 \
  --chunks 1 --steps-per-chunk 1 && exits 2 0 &&
  [ "$(grep -c "names no option" "$work/out")" -eq 1 ] &&
  grep -q "warning: RINGTRAIN_CHUNK names no option of ringtrain bench: ignored (did you mean RINGTRAIN_CHUNKS, --chunks?)" "$work/out"; then
  echo "ok   another program's variables are no misspelling; a misspelt one is warned about once"
else
  fail "RINGTRAIN_* variables of other programs"
  sed 's/^/     | /' "$work/out"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
