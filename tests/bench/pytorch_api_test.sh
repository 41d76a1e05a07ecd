#!/usr/bin/env bash
# scripts/bench/pytorch_api.sh on one short round of the tiny MLP: a table row and a JSON entry
# per way (ddp-gloo, ddp-hook, ddp-ringtrain, optimizer), each with its samples per second and its ratios to
# ddp-gloo, to twice the one rank's and to 2 ranks alone's; the one rank's and 2 alone's rows and
# the ceiling line; then bad options (exit status 2). No speed is judged: benchmarks are not
# timed tests. SKIP (77) without python3-torch (the script would install it).
#   pytorch_api_test.sh PYTORCH_API_SH BUILD_DIR PYTHON
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
script="$1"
build_dir="$2"
export RINGTRAIN_PYTHON="$3"
if ! "$RINGTRAIN_PYTHON" -c 'import torch' 2>/dev/null; then
  echo "SKIP: needs python3-torch"
  exit 77
fi

if timeout 300 bash "$script" --build "$build_dir" --rounds 1 --models tiny-mlp \
  --batch-size 8 --warmup 1 --batches 1 --iters 2 --json "$work/s.json" >"$work/s.out" 2>"$work/s.err"; then
  ok "one round: exit status 0"
else
  fail "one round: exit status $?" "$(cat "$work/s.out" "$work/s.err")"
fi
for way in ddp-gloo ddp-hook ddp-ringtrain optimizer; do
  grep -qE "^ *tiny-mlp +8 +$way +[0-9.]+ \([0-9.]+-[0-9.]+\) +[0-9.]+ \(" "$work/s.out" &&
    ok "row tiny-mlp $way" || fail "no row tiny-mlp $way" "$(cat "$work/s.out")"
done
grep -qE "^ *tiny-mlp +8 +one rank +[0-9.]+ \([0-9.]+-[0-9.]+\)$" "$work/s.out" &&
  ok "row tiny-mlp one rank" || fail "no row tiny-mlp one rank" "$(cat "$work/s.out")"
grep -qE "^ *tiny-mlp +8 +2 alone +[0-9.]+ \([0-9.]+-[0-9.]+\) +[0-9.]+ \(.*\) +[0-9.]+ \(" "$work/s.out" &&
  ok "row tiny-mlp 2 alone" || fail "no row tiny-mlp 2 alone" "$(cat "$work/s.out")"
grep -qE "^ceiling \(2 alone over ddp-gloo, .*\): tiny-mlp [0-9.]+$" "$work/s.out" &&
  ok "the ceiling line" || fail "no ceiling line" "$(cat "$work/s.out")"
grep -q "^malloc: fixed; DDP's buckets: views$" "$work/s.out" && ok "the malloc and buckets line" ||
  fail "no malloc and buckets line" "$(cat "$work/s.out")"
grep -q "^goal (mlp-28m at least 1.3, every model at least 1.0): " "$work/s.out" &&
  ok "the goal line" || fail "no goal line" "$(cat "$work/s.out")"
"$RINGTRAIN_PYTHON" - "$work/s.json" <<'PY' && ok "JSON: 4 ways, one round" || fail "JSON" "$(cat "$work/s.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["rounds"] == 1 and s["ranks"] == 2 and s["malloc"] == "fixed", s
assert s["ddp_buckets"] == "views", s
assert [m["model"] for m in s["models"]] == ["tiny-mlp"], s
for m in s["models"]:
    assert set(m["ways"]) == {"ddp-gloo", "ddp-hook", "ddp-ringtrain", "optimizer"}, m
    gloo = m["ways"]["ddp-gloo"]["samples_per_s"][0]
    alone, two = m["one_rank_samples_per_s"], m["two_alone_samples_per_s"]
    assert len(alone) == 1 and alone[0] > 0 and len(two) == 1 and two[0] > 0, m
    assert abs(m["ceiling_over_ddp_gloo"][0] - two[0] / gloo) < 1e-9, m
    for way in m["ways"].values():
        assert len(way["samples_per_s"]) == 1 and way["samples_per_s"][0] > 0, way
        assert abs(way["ratio_to_ddp_gloo"][0] - way["samples_per_s"][0] / gloo) < 1e-9, way
        bound = way["samples_per_s"][0] / (2 * alone[0])
        assert abs(way["ratio_to_twice_one_rank"][0] - bound) < 1e-9, way
        assert abs(way["ratio_to_two_alone"][0] - way["samples_per_s"][0] / two[0]) < 1e-9, way
PY

for bad in "--rounds 0" "--rounds x" "--batches -1" "--models tiny-mlp,nosuch" "--no-such-option 1" "--json" "--malloc nosuch" "--ddp-buckets nosuch"; do
  # shellcheck disable=SC2086
  timeout 60 bash "$script" --build "$build_dir" $bad >"$work/bad.out" 2>&1
  status=$?
  [ "$status" -eq 2 ] && ok "$bad: exit status 2" || fail "$bad: exit status $status, want 2" "$(cat "$work/bad.out")"
done

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
