#!/usr/bin/env bash
# scripts/bench/zero_speed.sh on a tiny GPT (1 layer, 2 heads, width 32, context 16, vocabulary
# 256, batch 2, 2 steps, 2 rounds, 2 ranks): a row per --zero value in the table, and in the JSON
# both values with positive times whose range holds their median, --zero 0's ratio to itself 1;
# one log per run and round; bad options refused with exit status 2. No speed is judged.
#   zero_speed_test.sh ZERO_SPEED_SH RINGTRAIN
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
script="$1"
export RINGTRAIN_BIN="$2"

if timeout 300 bash "$script" --model-args "--layers 1 --heads 2 --width 32 --context 16 --vocab 256" \
  --batch 2 --steps 2 --rounds 2 --out "$work/out" --json "$work/summary.json" >"$work/out.txt" 2>&1; then
  ok "tiny GPT: exit status 0"
else
  fail "tiny GPT: exit status $?" "$(cat "$work/out.txt")"
fi
for zero in 0 1; do
  grep -qE "^ +$zero +[0-9]+ \(" "$work/out.txt" && ok "table row of --zero $zero" ||
    fail "no table row of --zero $zero" "$(cat "$work/out.txt")"
  for round in 1 2; do
    [ -s "$work/out/zero$zero-r$round.log" ] && ok "log of --zero $zero, round $round" ||
      fail "no log of --zero $zero, round $round"
  done
done
python3 - "$work/summary.json" <<'PY' && ok "the JSON" || fail "the JSON" "$(cat "$work/summary.json")"
import json, sys
summary = json.load(open(sys.argv[1]))
assert summary["rounds"] == 2, summary
points = {p["zero"]: p for p in summary["points"]}
assert sorted(points) == [0, 1], summary
for p in points.values():
    low, high = p["ms_per_step_range"]
    assert 0 < low <= p["ms_per_step_median"] <= high, p
    assert p["ratio_to_zero0_median"] > 0, p
assert points[0]["ratio_to_zero0_median"] == 1 and points[0]["ratio_to_zero0_range"] == [1, 1], points[0]
PY

for bad in "--rounds 0" "--steps x" "--ranks 0" "--no-such-option 1"; do
  # shellcheck disable=SC2086
  timeout 60 bash "$script" $bad >"$work/bad.out" 2>&1
  status=$?
  [ "$status" -eq 2 ] && ok "$bad: exit status 2" || fail "$bad: exit status $status, want 2" "$(cat "$work/bad.out")"
done

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
