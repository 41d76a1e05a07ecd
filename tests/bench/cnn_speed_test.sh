#!/usr/bin/env bash
# scripts/bench/model_speed.sh --model cnn on one short round (3 training steps, step rounds of 0.05 s): the
# table's and the JSON's rows for ringtrain's step on one core and its 2-rank training, with the
# build compared against itself through a copy (--compare-build), and without PyTorch
# (--no-pytorch: CI does not install python3-torch); PyTorch's rows and the ratios too where
# /usr/bin/python3 imports torch. No speed is judged: benchmarks are not timed tests. Then bad
# options (exit status 2), and the old cnn_speed.sh naming the new command (exit status 2).
#   cnn_speed_test.sh MODEL_SPEED_SH BUILD_DIR
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
script="$1"
build_dir="$2"
# The same programs under another folder, as a compared build.
mkdir -p "$work/other/bin"
cp "$build_dir/bin/ringtrain" "$build_dir/bin/model_step_perf" "$work/other/bin/"
short=(--model cnn --rounds 1 --steps 3 --warmup 1 --seconds 0.05 --repeats 1 --build-dir "$build_dir")

# run NAME ARGS...: the table in $work/NAME.out, the JSON in $work/NAME.json.
run() {
  local name="$1"
  shift
  if timeout 300 bash "$script" "${short[@]}" --out "$work/$name" --json "$work/$name.json" "$@" \
    >"$work/$name.out" 2>"$work/$name.err"; then
    ok "$name: exit status 0"
    sed 's/^/     | /' "$work/$name.out"
  else
    fail "$name: exit status $?"
    sed 's/^/     | /' "$work/$name.out" "$work/$name.err"
  fi
}

# check_rows NAME WANT_TORCH
check_rows() {
  local name="$1" want_torch="$2" row
  grep -qF "# glibc malloc: MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 in every run" \
    "$work/$name.out" && ok "$name: says how malloc is set" || fail "$name: no malloc line"
  for row in "| ringtrain step (forward+backward) |" "| ringtrain@compare step |" \
    "| ringtrain 2 ranks (auto) |" "| ringtrain@compare 2 ranks |"; do
    grep -qF "$row" "$work/$name.out" && ok "$name: row '$row'" || fail "$name: no row '$row'"
  done
  for row in "| PyTorch step (forward+backward) |" "| PyTorch DDP gloo 2 ranks |" \
    "| step / pytorch forward+backward |" "| 2 ranks / pytorch ddp |"; do
    if [ "$want_torch" = 1 ]; then
      grep -qF "$row" "$work/$name.out" && ok "$name: row '$row'" || fail "$name: no row '$row'"
    else
      grep -qF "$row" "$work/$name.out" && fail "$name: row '$row' without PyTorch" ||
        ok "$name: no row '$row' without PyTorch"
    fi
  done
  python3 - "$work/$name.json" "$want_torch" <<'PY' && ok "$name: JSON" || fail "$name: JSON"
import json, sys
s = json.load(open(sys.argv[1]))
want_torch = sys.argv[2] == "1"
# The cnn's products per sample as ringtrain counts them (no input gradient for conv1), batch 64.
forward = 2 * (16 * 25 * 784 + 32 * 400 * 196 + 1568 * 128 + 128 * 10)
assert abs(s["flops_per_step"] - 64 * (3 * forward - 2 * 16 * 25 * 784)) < 1e4 * 64, s
steps = {"ringtrain step (forward+backward)", "ringtrain@compare step"}
if want_torch:
    steps |= {"PyTorch step (forward+backward)", "PyTorch step + SGD"}
assert set(s["one_core_ms_per_step"]) == steps, s["one_core_ms_per_step"].keys()
assert set(s["one_core_cpu_ms_per_step"]) == steps, s["one_core_cpu_ms_per_step"].keys()
trains = {"ringtrain 2 ranks (auto)", "ringtrain@compare 2 ranks"}
if want_torch:
    trains.add("PyTorch DDP gloo 2 ranks")
assert set(s["two_ranks_samples_per_second"]) == trains, s["two_ranks_samples_per_second"].keys()
for group in ("one_core_ms_per_step", "one_core_cpu_ms_per_step", "two_ranks_samples_per_second"):
    for name, c in s[group].items():
        assert c["median"] > 0 and c["min"] <= c["median"] <= c["max"], name
assert bool(s["ratios"]) == want_torch, s["ratios"]
assert s["rounds"] == 1 and s["train_steps"] == 3
PY
}

run no-pytorch --no-pytorch --compare-build "$work/other"
check_rows no-pytorch 0
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  run pytorch --compare-build "$work/other"
  check_rows pytorch 1
else
  echo "skipping the PyTorch rows: /usr/bin/python3 cannot import torch (python3-torch)"
fi
for bad in "--rounds 0" "--rounds 08" "--seconds x" "--compare-build $build_dir" "--compare-build /nowhere" \
  "--no-such-option" "--quick" "--precision bf16"; do
  # shellcheck disable=SC2086
  bash "$script" --model cnn --build-dir "$build_dir" --no-pytorch $bad >"$work/bad.out" 2>&1
  status=$?
  [ "$status" -eq 2 ] && ok "$bad: exit status 2" || fail "$bad: exit status $status, want 2"
done

bash "$(dirname "$script")/cnn_speed.sh" --rounds 1 >"$work/old.out" 2>&1
status=$?
[ "$status" -eq 2 ] && grep -qF "model_speed.sh --model cnn" "$work/old.out" &&
  ok "cnn_speed.sh: exit status 2, names model_speed.sh" || fail "cnn_speed.sh: exit status $status" "$(cat "$work/old.out")"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
