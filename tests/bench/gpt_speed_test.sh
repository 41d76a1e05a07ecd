#!/usr/bin/env bash
# scripts/bench/model_speed.sh --model gpt --quick on a tiny GPT (1 layer, 2 heads, width 32, context 16,
# vocabulary 256): the table has ringtrain's rows (1 and 2 ranks, the 2-rank scaling efficiency,
# the sgemm peak unless the build links no OpenBLAS and there is no PyTorch) and the summary JSON
# the same configurations, positive, with the model's FLOPs per token as ringtrain counts them. PyTorch's rows (1 thread, DDP gloo on 2 ranks, the
# ratios) are checked where /usr/bin/python3 imports torch; elsewhere the script must say that it
# skipped them, and so does this test. No speed is judged: benchmarks are not timed tests.
# Then --no-pytorch without --quick (1 round of 2 steps: a real run's path), an interpreter
# without torch (RINGTRAIN_TORCH_PYTHON), --precision bf16 --one-rank on a CPU with AVX512-BF16
# (ringtrain and PyTorch at 1 rank only, the JSON says bf16), bad options (exit status 2), and
# the old gpt_speed.sh naming the new command (exit status 2).
#   gpt_speed_test.sh MODEL_SPEED_SH BUILD_DIR RINGTRAIN
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
script="$1"
build_dir="$2"
export RINGTRAIN_BIN="$3"
tiny="--layers 1 --heads 2 --width 32 --context 16 --vocab 256"
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  torch=1
else
  torch=0
  echo "skipping the PyTorch parts: /usr/bin/python3 cannot import torch (Debian's python3-torch" \
    "is not installed); checking ringtrain's rows and the script's message"
fi

# check NAME WANT_TORCH_ROWS: the table in $work/NAME.out and the JSON in $work/NAME.json.
check() {
  local name="$1" want_torch="$2" row
  grep -qF "# glibc malloc: MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 in every run" \
    "$work/$name.out" && ok "$name: says how malloc is set" || fail "$name: no malloc line"
  for row in "| ringtrain, 1 rank |" "| ringtrain, 2 ranks (shm) |" \
    "| scaling efficiency 2 ranks, ringtrain |"; do
    grep -qF "$row" "$work/$name.out" && ok "$name: row '$row'" || fail "$name: no row '$row'"
  done
  # The peak needs the build's OpenBLAS (or PyTorch): an Eigen-only build without it says so.
  if grep -q "sgemm peak: not measured" "$work/$name.out"; then
    echo "skipping the sgemm peak row: the build links no OpenBLAS and there is no PyTorch"
    peak=0
  else
    peak=1
    row="| sgemm peak, one thread |"
    grep -qF "$row" "$work/$name.out" && ok "$name: row '$row'" || fail "$name: no row '$row'"
  fi
  for row in "| PyTorch, 1 thread |" "| PyTorch DDP gloo, 2 ranks |" \
    "| ringtrain / PyTorch, 1 rank |" "| ringtrain / PyTorch DDP, 2 ranks |" \
    "| scaling efficiency 2 ranks, pytorch |"; do
    if [ "$want_torch" = 1 ]; then
      grep -qF "$row" "$work/$name.out" && ok "$name: row '$row'" || fail "$name: no row '$row'"
    else
      grep -qF "$row" "$work/$name.out" && fail "$name: row '$row' without PyTorch" ||
        ok "$name: no row '$row' without PyTorch"
    fi
  done
  if [ "$want_torch" = 0 ]; then
    grep -q "^# PyTorch runs skipped: " "$work/$name.out" && ok "$name: says PyTorch was skipped" ||
      fail "$name: does not say that PyTorch was skipped"
  fi
  python3 - "$work/$name.json" "$want_torch" "$peak" <<'EOF' && ok "$name: JSON" || fail "$name: JSON"
import json, sys
s = json.load(open(sys.argv[1]))
want_torch, peak = sys.argv[2] == "1", sys.argv[3] == "1"
L, C, T, V = 1, 32, 16, 256
assert s["model_flops_per_token"] == 3 * (L * (24 * T * C * C + 4 * T * T * C) + 2 * V * C * T) / T
want = {"ringtrain-1", "ringtrain-2"} | ({"pytorch-1", "pytorch-ddp-2"} if want_torch else set())
assert set(s["configurations"]) == want, s["configurations"].keys()
for name, c in s["configurations"].items():
    assert c["median"] > 0 and c["min"] <= c["median"] <= c["max"], name
    assert c["gflops_per_core"]["median"] > 0 and ("share_of_sgemm_peak" in c) == peak, name
assert ("sgemm_peak_gflops" in s) == peak and (not peak or s["sgemm_peak_gflops"]["median"] > 0)
assert s["scaling_efficiency"]["ringtrain"]["median"] > 0
assert ("pytorch" in s["scaling_efficiency"]) == want_torch
assert set(s["ratios"]) == ({"ringtrain_over_pytorch_1", "ringtrain_over_pytorch_2"}
                            if want_torch else set())
assert ("pytorch_skipped" in s) != want_torch
assert s["rounds"] == 1 and s["steps"] == 2 and s["warmup"] == 1
EOF
}

# run NAME ARGS...: the script with --quick, or with $how instead where set (the full path).
run() {
  local name="$1"
  shift
  # shellcheck disable=SC2086  # $how is a list of options
  if timeout 240 bash "$script" --model gpt ${how:---quick} --build-dir "$build_dir" --model-args "$tiny" \
    --out "$work/$name" --json "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err"; then
    ok "$name: exit status 0"
    sed 's/^/     | /' "$work/$name.out"
  else
    fail "$name: exit status $?"
    sed 's/^/     | /' "$work/$name.out" "$work/$name.err"
  fi
}

run quick
check quick "$torch"
# Not --quick: the path of a real run (whose peak set-up once ended the script under set -e).
how="--rounds 1 --steps 2 --warmup 1" run no-pytorch --no-pytorch
check no-pytorch 0
# As on a machine without python3-torch: --quick skips PyTorch and says so.
RINGTRAIN_TORCH_PYTHON=/bin/false run no-torch
check no-torch 0
grep -q "^# PyTorch runs skipped: /bin/false cannot import torch" "$work/no-torch.out" &&
  ok "no-torch: names the missing torch" || fail "no-torch: does not name the missing torch"

if grep -qw avx512_bf16 /proc/cpuinfo; then
  run bf16 --precision bf16 --one-rank
  grep -qF "| ringtrain, 1 rank |" "$work/bf16.out" && ok "bf16: ringtrain's 1-rank row" ||
    fail "bf16: no ringtrain 1-rank row"
  grep -qF "| ringtrain, 2 ranks" "$work/bf16.out" && fail "bf16: a 2-rank row with --one-rank" ||
    ok "bf16: no 2-rank row with --one-rank"
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); assert s["precision"] == "bf16"
assert set(s["configurations"]) == {"ringtrain-1"} | ({"pytorch-1"} if sys.argv[2] == "1" else set())' \
    "$work/bf16.json" "$torch" && ok "bf16: JSON" || fail "bf16: JSON"
  grep -q "device cpu precision bf16" "$work/bf16/r1-ringtrain-1.log" &&
    ok "bf16: ringtrain ran in bf16" || fail "bf16: ringtrain's log does not say bf16"
else
  echo "skipping --precision bf16: this CPU has no AVX512-BF16"
fi
bash "$script" --quick --build-dir "$build_dir" --precision fp8 >"$work/bad.out" 2>&1
status=$?
[ "$status" -eq 2 ] && ok "--precision fp8: exit status 2" || fail "--precision fp8: exit status $status"
bash "$script" --quick --build-dir "$build_dir" --rounds 0 >"$work/bad.out" 2>&1
status=$?
[ "$status" -eq 2 ] && ok "--rounds 0: exit status 2" || fail "--rounds 0: exit status $status, want 2"
bash "$script" --no-such-option >"$work/bad.out" 2>&1
status=$?
[ "$status" -eq 2 ] && ok "unknown option: exit status 2" || fail "unknown option: exit status $status"
bash "$script" --model gpt --quick --build-dir "$build_dir" --compare-build "$build_dir" >"$work/bad.out" 2>&1
status=$?
[ "$status" -eq 2 ] && ok "--compare-build with a GPT: exit status 2" || fail "--compare-build with a GPT: exit status $status"
bash "$(dirname "$script")/gpt_speed.sh" --quick >"$work/old.out" 2>&1
status=$?
[ "$status" -eq 2 ] && grep -qF "model_speed.sh --model gpt-mini" "$work/old.out" &&
  ok "gpt_speed.sh: exit status 2, names model_speed.sh" || fail "gpt_speed.sh: exit status $status" "$(cat "$work/old.out")"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
