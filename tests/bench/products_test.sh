#!/usr/bin/env bash
# scripts/bench/products.sh on the CNN, two short rounds: a table row and a JSON line for each of
# its eleven products (a convolution's a chunk of the batch at a time; none for the first layer's
# input gradient) and its step, whose FLOPs are the model's count, with positive GFLOP/s through
# models::product() and through cblas_sgemm (where the build links a BLAS); the FMA peak measured
# in the widest vectors /proc/cpuinfo lists (avx512f, else avx2 with fma), and AVX2's beside
# AVX-512's; with --peers, BLIS's and oneDNN's columns and JSON fields, positive (the script
# installs their Debian packages), and oneDNN held to one thread under OMP_NUM_THREADS=2; bad
# options exit 2 with one line. Judges no speed: benchmarks are not timed tests.
#   products_test.sh PRODUCTS_SH BUILD_DIR
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
script="$1"
build_dir="$2"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1
unset OPENBLAS_CORETYPE

if timeout 300 bash "$script" --build "$build_dir" --models cnn --rounds 2 --seconds 0.01 \
  --json "$work/p.jsonl" >"$work/p.out" 2>"$work/p.err"; then
  ok "two rounds: exit status 0"
else
  fail "two rounds: exit status $?" "$(cat "$work/p.out" "$work/p.err")"
fi
# A convolution multiplies a chunk of the batch's columns at a time (more than once a step of
# 64); the first layer's input gradient is not computed, so it has no row.
for layer in conv1 conv2 fc1 fc2; do
  times='1'
  [[ "$layer" == conv* ]] && times='([2-9]|[1-9][0-9]+)'
  for what in forward "weight grad" "input grad"; do
    [ "$layer $what" = "conv1 input grad" ] && continue
    grep -qE "^\| cnn \| $layer $what \| [0-9]+ x [0-9]+ x [0-9]+ \| $times \| [0-9.]+ \(" "$work/p.out" &&
      ok "row $layer $what" || fail "no row $layer $what" "$(cat "$work/p.out")"
  done
done
grep -q "conv1 input grad" "$work/p.out" && fail "a row for conv1's input gradient" "$(cat "$work/p.out")" ||
  ok "no row for the first layer's input gradient"
# The shapes' FLOPs are the model's own count.
if line=$(grep -E "^# cnn: products of a step of 64: [0-9.]+ GFLOP; the model counts [0-9.]+$" "$work/p.out"); then
  read -r -a words <<<"$line"
  [ "${words[8]}" = "${words[13]}" ] && ok "the step's FLOPs are the model's count (${words[8]} GFLOP)" ||
    fail "the step's FLOPs ${words[8]} GFLOP, the model counts ${words[13]}" "$line"
else
  fail "no FLOPs line" "$(cat "$work/p.out")"
fi
grep -qE "^\| cnn \| step \(all products\) \| [0-9.]+ GFLOP \|" "$work/p.out" && ok "the step row" ||
  fail "no step row" "$(cat "$work/p.out")"
want=none
grep -qw avx512f /proc/cpuinfo && want=avx512
[ "$want" = none ] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && want=avx2
grep -qE "^\| FMA peak, one core \| $want \|" "$work/p.out" && ok "the peak in $want" ||
  fail "the peak is not in $want" "$(cat "$work/p.out")"
if [ "$want" = avx512 ]; then
  grep -qE "^\| FMA peak, one core \| avx2 \| \| \| [0-9.]+ \(.*\) \| [0-9]+% \|" "$work/p.out" &&
    ok "AVX2's peak beside AVX-512's" || fail "no row for AVX2's peak" "$(cat "$work/p.out")"
fi
blas=0
grep -q "products by OpenBLAS" "$work/p.out" && blas=1
python3 - "$work/p.jsonl" "$want" "$blas" <<'PY' && ok "JSON: 12 rows" || fail "JSON" "$(cat "$work/p.jsonl")"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 12, len(rows)
for r in rows:
    assert r["model"] == "cnn" and r["ringtrain_gflops"] > 0, r
    assert (r["sgemm_gflops"] > 0) == (sys.argv[3] == "1"), r
    assert r["peak_isa"] == sys.argv[2] and (r["peak_gflops"] > 0) == (sys.argv[2] != "none"), r
    # AVX2's peak: its own measurement beside AVX-512's, the same one where AVX2 is the widest
    avx2 = r["peak_avx2_gflops"]
    assert avx2 > 0 if sys.argv[2] == "avx512" else avx2 == r["peak_gflops"], r
assert rows[-1]["product"] == "step (all products)", rows[-1]
PY

if timeout 600 bash "$script" --build "$build_dir" --models cnn --rounds 1 --seconds 0.01 \
  --peers blis,onednn --json "$work/peers.jsonl" >"$work/peers.out" 2>"$work/peers.err"; then
  ok "--peers blis,onednn: exit status 0"
else
  fail "--peers blis,onednn: exit status $?" "$(cat "$work/peers.out" "$work/peers.err")"
fi
grep -qE "^\| cnn \| step \(all products\) \|.*\| [0-9.]+ \([0-9.-]+\) \| [0-9.]+ \([0-9.-]+\) \|$" \
  "$work/peers.out" && grep -q "| blis GFLOP/s | onednn GFLOP/s |" "$work/peers.out" &&
  ok "--peers: the blis and onednn columns" || fail "--peers: no blis and onednn columns" "$(cat "$work/peers.out")"
python3 - "$work/peers.jsonl" <<'PY' && ok "--peers: JSON" || fail "--peers: JSON" "$(cat "$work/peers.jsonl")"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 12, len(rows)
assert all(r["blis_gflops"] > 0 and r["onednn_gflops"] > 0 for r in rows), rows
PY

# oneDNN's OpenMP takes every core unless held: product_perf holds it to one thread whatever the
# caller's OMP_NUM_THREADS says.
if OMP_NUM_THREADS=2 timeout 120 "$build_dir/bin/product_perf" --models cnn --cnn-batch 2 \
  --repeats 1 --seconds 0.01 --peers onednn >"$work/omp.out" 2>&1; then
  grep -qx "# onednn: OpenMP threads: 1" "$work/omp.out" &&
    ok "OMP_NUM_THREADS=2: oneDNN held to 1 thread" || fail "OMP_NUM_THREADS=2: oneDNN not held" "$(cat "$work/omp.out")"
else
  fail "OMP_NUM_THREADS=2 --peers onednn: exit status $?" "$(cat "$work/omp.out")"
fi

for bad in "--rounds 0" "--seconds x" "--models cnn,nosuch" "--no-such-option 1" "--peers blis,nosuch"; do
  # shellcheck disable=SC2086
  timeout 60 bash "$script" --build "$build_dir" $bad >"$work/bad.out" 2>&1
  status=$?
  [ "$status" -eq 2 ] && ok "$bad: exit status 2" || fail "$bad: exit status $status, want 2" "$(cat "$work/bad.out")"
done

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
