#!/usr/bin/env bash
# allreduce_perf under mpirun with 2 ranks, driven with nccl-tests' flags and read the way
# nccl-tests' users read all_reduce_perf (parse_nccl_tests.py: rows by column position, the
# '# Avg bus bandwidth' line): every size appears in every backend's table, #wrong is 0 when
# checked, an injected wrong value is counted, progress stays on stderr. Then every bad input:
# one line naming the option, exit status 2 on every rank, no hang.
#   allreduce_perf_test.sh ALLREDUCE_PERF PARSER MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
perf="$1"
parser="$2"
shift 2
mpirun=("$@")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
ok() { echo "ok   $1"; }
fail() {
  echo "FAIL $1"
  failures=$((failures + 1))
}

# run NAME WANT_STATUS ARGS...: 2 ranks; stdout to $work/NAME.out, stderr to $work/NAME.err.
run() {
  local name="$1" want="$2" status
  shift 2
  timeout 120 "${mpirun[@]}" -np 2 "$perf" "$@" >"$work/$name.out" 2>"$work/$name.err"
  status=$?
  if [ "$status" -ne "$want" ]; then
    fail "$name: exit status $status, want $want"
    sed 's/^/     | /' "$work/$name.out" "$work/$name.err"
    return 1
  fi
}

# parsed NAME PARSER-ARGS...: the parser's verdict on NAME's stdout.
parsed() {
  local name="$1" verdict
  shift
  if verdict="$(python3 "$parser" "$work/$name.out" "$@")"; then
    ok "$name: $verdict"
  else
    fail "$name: $verdict"
    sed 's/^/     | /' "$work/$name.out"
  fi
}

# --help lists every nccl-tests option this program takes, under its letter.
help="$("$perf" --help 2>&1)"
missing=""
for letter in b e f i n w c g t d o a z m G N C T p R; do
  grep -q -E "^  -$letter \[ --[a-z_]+ \]" <<<"$help" || missing+=" -$letter"
done
if [ -z "$missing" ]; then ok "--help lists nccl-tests' options"; else fail "--help lacks$missing"; fi

quick=(-n 2 -w 1)
if run sweep 0 -b 8 -e 32K -f 4 -c 1 "${quick[@]}" --backends mpi,ring --json "$work/sweep.json"; then
  parsed sweep --tables 2 --sizes 8,32,128,512,2048,8192,32768
  # The classic one-liner: the last field of the average's line, once per table.
  averages="$(grep '^# Avg bus bandwidth' "$work/sweep.out" | awk '{print $NF}' | tr '\n' ' ')"
  if [[ "$averages" =~ ^[0-9.e+-]+\ [0-9.e+-]+\ $ ]]; then ok "sweep: averages by awk: $averages"; else fail "sweep: averages by awk: '$averages'"; fi
  if grep -q -E '^ *[0-9]+ ' "$work/sweep.err"; then fail "sweep: table rows on stderr"; else ok "sweep: stderr holds no rows"; fi
  if python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(len(d["results"]) != 14 or d["wrong"] != 0)' "$work/sweep.json"; then
    ok "sweep: the JSON holds 14 rows, none wrong"
  else
    fail "sweep: the JSON"
  fi
fi

# A command line written for nccl-tests' all_reduce_perf, -i and -f together (the factor wins, as
# there) and -N, -C, -T at their defaults: one table, of the backend training uses (tuned), so
# that a script reading the first '# Avg bus bandwidth' line reads ringtrain's figure.
sizes="$(python3 -c 'print(",".join(str(8 << k) for k in range(25)))')"
if run nccl_tests_line 0 -b 8 -e 128M -f 2 -i 0 -g 1 -c 1 -n 20 -w 5 -N 1 -C 0 -T 0; then
  parsed nccl_tests_line --tables 1 --sizes "$sizes" --backends tuned
fi

# Fixed steps (-i), every type and reduction (-d all -o all), nccl-tests' other flags at values
# that apply here.
if run steps 0 -b 64 -e 192 -i 64 -d all -o all -z 1 -m 2 -a 0 -g 1 -t 1 -G 0 -c 2 "${quick[@]}" --backends ring; then
  parsed steps --tables 1 --sizes 64,128,192 --cases 24
fi

# Rank 1 spoils one element of every checked result: 2 per row (that element, and rank 1's bytes
# differing from rank 0's), every measurement failed, exit status 1.
if run wrong 1 -b 1K -e 4K -f 2 -c 1 "${quick[@]}" --backends ring --test-wrong-rank 1; then
  parsed wrong --tables 1 --sizes 1024,2048,4096 --wrong 2
  if grep -q '^# Out of bounds values : 12 FAILED$' "$work/wrong.out"; then ok "wrong: 3 rows x 2 placements x 2 ranks out of bounds, as nccl-tests counts"; else fail "wrong: $(grep 'Out of bounds' "$work/wrong.out")"; fi
fi

# -c 0: nothing checked, #wrong -1 as nccl-tests prints it.
if run unchecked 0 -b 8 -e 8 -c 0 "${quick[@]}" --backends mpi; then
  parsed unchecked --tables 1 --sizes 8 --wrong -1
fi

# k of n on rank 0's stderr, one line per row with --progress-seconds 0; stdout unchanged.
if run progress 0 -b 8 -e 512 -f 8 "${quick[@]}" --backends mpi,ring --progress-seconds 0; then
  parsed progress --tables 2 --sizes 8,64,512
  lines="$(grep -c -E '^allreduce_perf: [1-6]/6 rows done' "$work/progress.err")"
  if [ "$lines" -eq 6 ] && ! grep -q 'rows done' "$work/progress.out"; then ok "progress: 6 lines 1/6 .. 6/6 on stderr"; else fail "progress: $lines lines on stderr"; sed 's/^/     | /' "$work/progress.err"; fi
fi

# expect NAME PATTERN ARGS...: 2 ranks, each in a wrapper that prints its exit status (and exits 0,
# so that mpirun does not kill the other before it reports): both 2, the message once, in time.
expect() {
  local name="$1" pattern="$2"
  shift 2
  local start=$SECONDS output count statuses
  # shellcheck disable=SC2016  # expanded by the rank's shell
  output="$(timeout 60 "${mpirun[@]}" -np 2 bash -c '"$0" "$@"; echo "rank-exit $?"' "$perf" "$@" 2>&1)"
  count="$(grep -c -E "error: .*($pattern)" <<<"$output")"
  statuses="$(grep '^rank-exit' <<<"$output" | sort | uniq -c | tr -s ' ')"
  if [ "$statuses" = " 2 rank-exit 2" ] && [ "$count" -eq 1 ] && [ $((SECONDS - start)) -lt 30 ]; then
    ok "$name: $(grep -m1 -E "error: .*($pattern)" <<<"$output")"
  else
    fail "$name: exit statuses '$statuses' (want 2 on both ranks), message seen $count times (want 1), $((SECONDS - start)) s"
    echo "$output" | sed 's/^/     | /'
  fi
}

expect "sizes in the wrong order" "--minbytes 1048576 is larger than --maxbytes 1024" -b 1M -e 1K
expect "zero -b" "--minbytes 0: smaller than one float element \(4 bytes\)" -b 0 -e 64
expect "zero -e" "--minbytes 8 is larger than --maxbytes 0" -e 0
expect "below one element" "--minbytes 4: smaller than one double element \(8 bytes\)" -b 4 -d double
expect "factor 1" "--stepfactor 1: must be at least 2" -f 1
expect "factor 0" "--stepfactor 0: must be at least 2" -f 0
# -f 1 and -i together: the increment, as in nccl-tests (a factor counts only above 1).
if run factor_one_and_step 0 -b 64 -e 192 -f 1 -i 64 "${quick[@]}"; then
  parsed factor_one_and_step --tables 1 --sizes 64,128,192 --backends tuned
fi
expect "zero step" "--stepbytes 0: must be at least 1" -i 0
expect "too many sizes" "--stepbytes 8: more than 10000 sizes" -b 8 -e 1M -i 8
expect "not a size" "--maxbytes: '12Q' is not a size" -e 12Q
expect "unknown backend" "--backends: unknown backend 'foo' \(known: mpi, ring, tuned, hierarchical" --backends foo
expect "unknown datatype" "--datatype: 'int8' is not one of int32, int64, half, float, double, bfloat16, all" -d int8
expect "unknown op" "--op: 'prod' is not one of sum, max, min, avg, all" -o prod
expect "beyond memory" "--maxbytes [0-9]+: the send and receive buffers need .* GiB on each of the 2 rank\(s\) on this node, but the machine has .* GiB of memory" -e 4096G
expect "-g 2" "--ngpus 2: only 1" -g 2
expect "-t 2" "--nthreads 2: only 1" -t 2
expect "-G 1" "--cudagraph 1: refused" -G 1
expect "-N 2" "--run_cycles 2: only 1" -N 2
expect "-C 1" "--report_cputime 1: only 0" -C 1
expect "-T 5" "--timeout 5: only 0; bound the run with mpirun --timeout" -T 5
expect "-p 1" "--parallel_init 1: only 0" -p 1
expect "-R 1" "--local_register 1: only 0" -R 1
expect "-c -1" "--check must be 0" -c -1
expect "-m 0" "--iters and --agg_iters must be at least 1" -m 0
expect "-a 4" "--average must be 0, 1, 2 or 3" -a 4
expect "unknown option" "unrecognised option '-F'" -F out.csv

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
