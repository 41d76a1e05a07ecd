#!/usr/bin/env bash
# --keep prunes only the checkpoints the run itself wrote: nothing saved before the run is lost.
# On 2 ranks, a run resumed from another folder's checkpoint (step 4) writes into a folder that
# holds another run's older checkpoint (step 2): with --keep 2 the run keeps its own newest two,
# removes its others, and leaves the other run's file as it was, saying once which it kept and
# why. With --resume auto the checkpoints it found, the one it resumed from among them, stay too.
#   keep_others_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
ringtrain="$1"
shift
mpirun=("$@")

train() {
  timeout 120 "${mpirun[@]}" -np 2 "$ringtrain" train --synthetic --synthetic-size 256 \
    --batch-size 8 --log-every 0 --eval-every 0 --checkpoint-every 1 "$@" 2>&1
}
names() { (cd "$1" && printf '%s ' ckpt-*.h5); }

if ! out="$(train --steps 4 --keep 0 --checkpoint-dir "$work/first")"; then
  fail "the first run" "$out"
fi
mkdir -p "$work/shared"
cp "$work/first/ckpt-00000002.h5" "$work/shared/"
sum_before="$(md5sum <"$work/shared/ckpt-00000002.h5")"

# Resumed from step 4 of another folder: the folder's step 2 is another run's.
if out="$(train --steps 8 --keep 2 --resume "$work/first/ckpt-00000004.h5" \
  --checkpoint-dir "$work/shared")"; then
  [ "$(names "$work/shared")" = "ckpt-00000002.h5 ckpt-00000007.h5 ckpt-00000008.h5 " ] &&
    ok "--keep 2 pruned its own checkpoints only: $(names "$work/shared")" ||
    fail "--keep 2 beside another run's checkpoint left: $(names "$work/shared")" "$out"
  [ "$(md5sum <"$work/shared/ckpt-00000002.h5")" = "$sum_before" ] &&
    ok "the other run's checkpoint is unchanged" || fail "the other run's checkpoint changed"
  check "the kept checkpoint is named once" "$out" \
    "--keep 2 prunes only this run's checkpoints: 1 other(s) in $work/shared stay (ckpt-00000002.h5)"
  [ "$(grep -c "prunes only this run's" <<<"$out")" -eq 1 ] ||
    fail "the kept checkpoints are named more than once" "$out"
else
  fail "the resumed run" "$out"
fi

# --resume auto: the checkpoint it resumed from (step 8) stays with the other run's; the run's own
# newest two remain.
if out="$(train --steps 12 --keep 2 --resume auto --checkpoint-dir "$work/shared")"; then
  [ "$(names "$work/shared")" = \
    "ckpt-00000002.h5 ckpt-00000007.h5 ckpt-00000008.h5 ckpt-00000011.h5 ckpt-00000012.h5 " ] &&
    ok "--resume auto keeps what it found: $(names "$work/shared")" ||
    fail "--resume auto with --keep 2 left: $(names "$work/shared")" "$out"
else
  fail "the run resumed with --resume auto" "$out"
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
