#!/usr/bin/env bash
# allreduce_perf --autotune on 2 ranks over a few small sizes writes a tuning table that
# --backends tuned --tuning-file then uses (its rules printed as written); the same table edited to
# another world size is ignored with one warning line, and a garbage file is refused with one
# line naming it, exit status 2 on every rank. `ringtrain train --backend tuned --tuning-file`
# takes the same three files the same way; with another backend it says once that the file is
# not used.
#   allreduce_tune_test.sh ALLREDUCE_PERF RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
perf="$1"
ringtrain="$2"
shift 2
mpirun=("$@")

# launch NAME WANT_STATUS PROGRAM ARGS...: 2 ranks; stdout and stderr to $work/NAME.*.
launch() {
  local name="$1" want="$2" status
  shift 2
  timeout 120 "${mpirun[@]}" -np 2 "$@" >"$work/$name.out" 2>"$work/$name.err"
  status=$?
  [ "$status" -eq "$want" ] && return 0
  fail "$name: exit status $status, want $want" "$(cat "$work/$name.out" "$work/$name.err")"
  return 1
}
# perf NAME WANT_STATUS ARGS...: allreduce_perf over a few small sizes.
perf() { launch "$1" "$2" "$perf" -b 8 -e 64K -f 8 -n 2 -w 1 "${@:3}"; }
# train NAME WANT_STATUS TUNING_FILE: 2 synthetic steps of --backend tuned.
train() {
  launch "$1" "$2" "$ringtrain" train --synthetic --synthetic-size 960 --steps 2 --log-every 0 \
    --backend tuned --tuning-file "$3"
}
# said NAME TEXT: ok when NAME's stderr holds TEXT on exactly one line (one rank says it).
said() {
  local count
  count="$(grep -cF -- "$2" "$work/$1.err")"
  if [ "$count" = 1 ]; then ok "$1: said once: $2"; else fail "$1: said $count times: $2" "$(cat "$work/$1.err")"; fi
}
# The rules printed after PREFIX in NAME's stdout.
rules() {
  local line
  line="$(grep -F -- "$2" "$work/$1.out")"
  echo "${line#"$2"}"
}

table="$work/tuning.json"
if perf tune 0 --autotune --tune-rounds 1 --tune-out "$table"; then
  written="$(rules tune "# tune: wrote $table: ")"
  if [ -n "$written" ] && grep -q '"world_size": 2' "$table" && grep -q '"rules"' "$table"; then
    ok "--autotune wrote $table: $written"
  else
    fail "--autotune: no table written (rules '$written')" "$(cat "$work/tune.out" "$table")"
  fi
  # One node: four candidates, the ring's two ways of writing among them.
  grep -q -E "^# +size \(B\) +recursive-doubling +ring +ring-cached +mpi +chosen$" "$work/tune.out" ||
    fail "--autotune: the candidates are not recursive-doubling, ring, ring-cached, mpi" "$(cat "$work/tune.out")"
  for size in 8 64 512 4096 32768; do
    grep -q -E "^ +$size( +[0-9.]+ \/ [0-9.]+){4} +[a-z-]+$" "$work/tune.out" || fail "--autotune: no row for $size B" "$(cat "$work/tune.out")"
  done

  if perf use 0 --backends tuned,mpi --tuning-file "$table"; then
    used="$(rules use "#  tuned: ")"
    if [ "$used" = "$written" ]; then ok "--tuning-file: tuned uses $used"; else fail "--tuning-file: tuned uses '$used', written '$written'"; fi
  fi
  sed 's/"world_size": 2/"world_size": 5/' "$table" >"$work/foreign.json"
  ignored="tuning file $work/foreign.json ignored (measured for 5 ranks, 2 per node; this job has 2, 2 per node); using the built-in table"
  perf foreign 0 --backends tuned --tuning-file "$work/foreign.json" && said foreign "$ignored"
  if train train_tuned 0 "$table"; then
    if grep -q "ignored" "$work/train_tuned.err"; then fail "train: the table was ignored"; else ok "train --tuning-file takes the table"; fi
  fi
  train train_foreign 0 "$work/foreign.json" && said train_foreign "$ignored"
  launch train_shm 0 "$ringtrain" train --synthetic --synthetic-size 960 --steps 2 --log-every 0 \
    --backend shm --tuning-file "$table" &&
    said train_shm "--tuning-file $table is not used: backend shm takes no tuning table (only tuned does)"
fi

echo '{"format": "ringtrain-allreduce-tuning", "version": 1, "rules": [' >"$work/garbage.json"
perf garbage 2 --backends tuned --tuning-file "$work/garbage.json" &&
  said garbage "error: tuning file $work/garbage.json: not valid"
train train_garbage 2 "$work/garbage.json" &&
  said train_garbage "error: --tuning-file: tuning file $work/garbage.json: not valid"
perf missing 2 --backends tuned --tuning-file "$work/none.json" &&
  said missing "error: tuning file $work/none.json: no such file"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
