#!/usr/bin/env bash
# scripts/bench/tuned_vs_mpi.sh on one short round (8 B to 64 B): a table row and a JSON entry
# per size and placement, each with both backends' times and their ratio, the built-in table
# named; then with a tuning file (the table it names is the file's); then bad options (exit
# status 2). No speed is judged: benchmarks are not timed tests.
#   tuned_vs_mpi_test.sh TUNED_VS_MPI_SH BUILD_DIR
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
script="$1"
build_dir="$2"

# run NAME ARGS...: the table in $work/NAME.out, the JSON in $work/NAME.json.
run() {
  local name="$1"
  shift
  if timeout 300 bash "$script" --build "$build_dir" --rounds 1 --max 64 --json "$work/$name.json" "$@" \
    >"$work/$name.out" 2>"$work/$name.err"; then
    ok "$name: exit status 0"
  else
    fail "$name: exit status $?" "$(cat "$work/$name.out" "$work/$name.err")"
  fi
}

# check_summary NAME TABLE: rows and JSON for 8, 16, 32 and 64 B in both placements.
check_summary() {
  local name="$1" table="$2" size placement
  grep -qF "tuned: $table" "$work/$name.out" && ok "$name: names the table '$table'" ||
    fail "$name: does not name the table '$table'" "$(cat "$work/$name.out")"
  for size in 8 16 32 64; do
    for placement in in_place out_of_place; do
      grep -qE "^ +$size +$placement +[0-9.]+ \(" "$work/$name.out" || fail "$name: no row $size $placement" "$(cat "$work/$name.out")"
    done
  done
  python3 - "$work/$name.json" <<'PY' && ok "$name: JSON, 8 entries of one round" || fail "$name: JSON" "$(cat "$work/$name.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["rounds"] == 1, s
rows = {(r["bytes"], r["placement"]) for r in s["sizes"]}
assert rows == {(b, p) for b in (8, 16, 32, 64) for p in ("in_place", "out_of_place")}, rows
for r in s["sizes"]:
    assert len(r["tuned_us"]) == 1 and len(r["mpi_us"]) == 1, r
    assert r["tuned_us"][0] > 0 and r["mpi_us"][0] > 0, r
    assert abs(r["median_ratio"] - r["mpi_us"][0] / r["tuned_us"][0]) < 1e-9, r
PY
}

run builtin
check_summary builtin "recursive-doubling up to 8192 B, ring-cached above"

cat >"$work/mpi-only.json" <<'JSON'
{ "format": "ringtrain-allreduce-tuning", "version": 1, "world_size": 2, "ranks_per_node": 2,
  "cpu": "CPU", "ringtrain": "VERSION", "rules": [ {"max_bytes": null, "algorithm": "mpi"} ] }
JSON
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
# The file must be made for this machine and build, or it is ignored as foreign.
python3 - "$work/mpi-only.json" "$cpu" "$build_dir" <<'PY'
import json, re, subprocess, sys
path, cpu, build = sys.argv[1:]
table = json.load(open(path))
table["cpu"] = cpu or "unknown"
out = subprocess.run([build + "/bin/ringtrain", "--version"], capture_output=True, text=True).stdout
table["ringtrain"] = re.search(r"\d+\.\d+\.\d+", out).group(0)
json.dump(table, open(path, "w"))
PY
run tuning-file --tuning-file "$work/mpi-only.json"
check_summary tuning-file "mpi at every size"

for bad in "--rounds 0" "--rounds x" "--no-such-option"; do
  # shellcheck disable=SC2086
  bash "$script" --build "$build_dir" $bad >"$work/bad.out" 2>&1
  status=$?
  [ "$status" -eq 2 ] && ok "$bad: exit status 2" || fail "$bad: exit status $status, want 2" "$(cat "$work/bad.out")"
done

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
