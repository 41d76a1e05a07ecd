#!/usr/bin/env bash
# scripts/bench/memory.sh on a tiny GPT (1 layer, 2 heads, width 32, context 16, vocabulary 256,
# batch 2, 1 step) at 1 and 2 ranks, fp32: the JSON has every requested point; ringtrain's are
# measured, with a positive peak for every rank and parts that follow from the model (parameters
# 4 bytes each, AdamW's state twice that at --zero 0, averaged gradients on 2 ranks only);
# PyTorch's are measured where /usr/bin/python3 imports torch, and recorded as skipped with the
# reason where it does not (an interpreter without torch shows that everywhere). --zero 1 joins
# when the build's ringtrain has --zero (its optimiser state on 2 ranks below --zero 0's). Then the
# safety rule: a headroom too small for any point skips every point, saying what it needs; and
# bad options (exit status 2). No memory figure is judged against a number: the relations only.
# With `quick` (CI's form), ringtrain's points on 2 ranks only (--no-pytorch), the safety rule and
# the bad options.
#   memory_test.sh MEMORY_SH BUILD_DIR RINGTRAIN [quick]
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
script="$1"
build_dir="$2"
export RINGTRAIN_BIN="$3"
quick="${4:-}"
tiny=(--models gpt-mini --model-args "--layers 1 --heads 2 --width 32 --context 16 --vocab 256"
  --batch 2 --steps 1 --ranks "1 2" --precisions fp32 --build-dir "$build_dir")
zero_values="0 1"
if [ -n "$quick" ]; then
  torch=0
elif /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  torch=1
else
  torch=0
  echo "skipping the PyTorch measurements: /usr/bin/python3 cannot import torch; checking that" \
    "the script records them as skipped"
fi

# check NAME WANT_TORCH RANKS [SKIP_REASON]: $work/NAME.json against the rules above; without
# torch, the PyTorch points skipped for SKIP_REASON (default: torch cannot be imported).
check() {
  python3 - "$work/$1.json" "$2" "$zero_values" "$3" "${4:-cannot import torch}" <<'EOF'
import json, sys
path, want_torch = sys.argv[1], sys.argv[2] == "1"
zero_values, rank_counts = ([int(v) for v in a.split()] for a in sys.argv[3:5])
skip_reason = sys.argv[5]
points = json.load(open(path))["points"]
L, H, C, T, V = 1, 2, 32, 16, 256
parameters = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
by = {(p["framework"], p["zero"], p["ranks"]): p for p in points}
want = {(f, z, r) for f in ("ringtrain", "pytorch") for z in zero_values for r in rank_counts}
assert set(by) == want, f"points {sorted(by)}, want {sorted(want)}"
for (framework, zero, ranks), p in sorted(by.items()):
    where = f"{framework} zero {zero} ranks {ranks}"
    assert p["model"] == "gpt-mini" and p["precision"] == "fp32" and p["batch"] == 2, p
    if framework == "pytorch" and not want_torch:
        assert p["status"] == "skipped" and skip_reason in p["reason"], (where, p)
        continue
    assert p["status"] == "ok", (where, p)
    peaks = p["peak_resident_bytes_per_rank"]
    assert len(peaks) == ranks and min(peaks) > 0, (where, peaks)
    assert p["peak_resident_bytes_max"] == max(peaks), (where, p)
    parts = p["parts_bytes"]
    assert parts["parameters"] == 4 * parameters, (where, parts, parameters)
    if framework == "ringtrain":
        assert p["accounted_bytes"] == sum(parts.values()), (where, p)
        assert parts["activations"] > 0 and parts["gradients"] >= parts["parameters"], (where, parts)
        assert parts["averaged_gradients"] == (4 * parameters if ranks > 1 else 0), (where, parts)
        assert p["peak_resident_bytes_max"] >= p["accounted_bytes"], (where, p)
    if zero == 0:
        assert parts["optimizer_state"] == 2 * parts["parameters"], (where, parts)
    elif ranks > 1:
        full = by[(framework, 0, ranks)]["parts_bytes"]["optimizer_state"]
        assert parts["optimizer_state"] < full, (where, parts, full)
EOF
}

run() {  # run NAME ARGS...: the script with the tiny settings and ARGS, into $work/NAME.*
  local name="$1"
  shift
  timeout 300 bash "$script" "${tiny[@]}" --zero-values "$zero_values" --out "$work/$name" \
    --json "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err"
}

if [ -n "$quick" ]; then
  if run quick --ranks 2 --no-pytorch; then ok "quick: exit status 0"; else fail "quick: exit status $?" "$(cat "$work/quick.out" "$work/quick.err")"; fi
  check quick 0 2 --no-pytorch && ok "quick: the JSON" || fail "quick: the JSON" "$(cat "$work/quick.json")"
  grep -qF "# glibc malloc: MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 in every run" \
    "$work/quick.out" && ok "quick: says how malloc is set" || fail "quick: no malloc line"
else
  if run all; then ok "all points: exit status 0"; else fail "all points: exit status $?" "$(cat "$work/all.out" "$work/all.err")"; fi
  check all "$torch" "1 2" && ok "all points: the JSON" || fail "all points: the JSON" "$(cat "$work/all.json")"
  for row in "| gpt-mini | fp32 | ringtrain --zero 0 | 1 |" "| gpt-mini | fp32 | ringtrain --zero 0 | 2 |" \
    "| gpt-mini | fp32 | PyTorch | 1 |" "| gpt-mini | fp32 | PyTorch DDP gloo | 2 |"; do
    grep -qF "$row" "$work/all.out" && ok "row '$row'" || fail "no row '$row'" "$(cat "$work/all.out")"
  done

  # An interpreter without torch: the PyTorch points skipped, with the reason.
  printf '#!/bin/sh\nexit 1\n' >"$work/python-without-torch"
  chmod +x "$work/python-without-torch"
  if RINGTRAIN_TORCH_PYTHON="$work/python-without-torch" run no-torch --ranks 1; then
    ok "no torch: exit status 0"
  else
    fail "no torch: exit status $?" "$(cat "$work/no-torch.out" "$work/no-torch.err")"
  fi
  check no-torch 0 1 && ok "no torch: the PyTorch points skipped with the reason" ||
    fail "no torch: the JSON" "$(cat "$work/no-torch.json")"
fi

# Nothing fits in a millionth of the memory: every point skipped before it starts, saying why.
if run tight --headroom 0.000001 --no-pytorch; then ok "tight: exit status 0"; else fail "tight: exit status $?" "$(cat "$work/tight.err")"; fi
grep -qE "skipped: needs ~[0-9.]+ GiB, MemAvailable [0-9.]+ GiB" "$work/tight.err" &&
  ok "tight: the skip message" || fail "tight: no skip message" "$(cat "$work/tight.err")"
python3 - "$work/tight.json" <<'EOF' && ok "tight: every point skipped in the JSON" || fail "tight: the JSON" "$(cat "$work/tight.json")"
import json, sys
points = json.load(open(sys.argv[1]))["points"]
assert points and all(p["status"] == "skipped" for p in points), points
assert all("MemAvailable" in p["reason"] for p in points if p["framework"] == "ringtrain"), points
EOF
[ ! -e "$work/tight/gpt-mini-fp32-ringtrain-zero0-np1.log" ] && ok "tight: nothing ran" ||
  fail "tight: a skipped point ran"

for bad in "--models nosuch" "--steps 0" "--precisions fp16" "--zero-values x" "--ranks 0" \
  "--headroom 2" "--no-such-option 1" "--json"; do
  # shellcheck disable=SC2086
  timeout 60 bash "$script" --build-dir "$build_dir" $bad >"$work/bad.out" 2>&1
  status=$?
  [ "$status" -eq 2 ] && ok "$bad: exit status 2" || fail "$bad: exit status $status, want 2" "$(cat "$work/bad.out")"
done

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
