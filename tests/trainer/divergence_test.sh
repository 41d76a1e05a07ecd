#!/usr/bin/env bash
# Divergence is never silent, under mpirun with 2 ranks: a NaN training loss (a huge --lr) stops
# every rank with exit status 3 and one line naming the step and the --lr; NaN parameters stop
# the job before a checkpoint of them is written, and the checkpoint written before stays and
# resumes; --check-finite skip leaves the skipped step's loss out; a run that cannot learn (a GPT at --lr 1e-7) is warned about once, by rank 0, as its
# loss stays at ln(vocabulary); runs that learn (the same GPT at a working --lr, an MLP) are not.
#   divergence_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
ringtrain="$1"
shift
mpirun=("$@")

# train NAME ARGS...: `ringtrain train ARGS` on 2 ranks; the output in $work/NAME.log, and each
# rank's exit status as the line "rank R status S" in $work/NAME.status.
train() {
  local name="$1"
  shift
  timeout 60 "${mpirun[@]}" -np 2 sh -c \
    '"$@"; echo "rank ${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-?}} status $?" >>"'"$work/$name.status"'"' \
    sh "$ringtrain" train "$@" >"$work/$name.log" 2>&1
}
# statuses NAME: "S S" -- the ranks' exit statuses, rank 0 first.
statuses() { sort "$work/$1.status" 2>/dev/null | awk '{print $4}' | paste -sd' '; }
# lines NAME PATTERN: how many lines of NAME's output match PATTERN (extended regex).
lines() { grep -cE -- "$2" "$work/$1.log"; }

data=(--synthetic --synthetic-size 960 --batch-size 16)
mlp=("${data[@]}" --hidden 256,256 --log-every 10)

# A learning rate of 100 makes the loss NaN within the first 10 steps (here; the step is
# whichever logged one comes first after it, so any is accepted).
train huge-lr "${mlp[@]}" --steps 40 --lr 100 --lr-schedule constant
message='error: the training loss is (nan|inf) at step [1-4]0: training diverged; try a lower --lr \(now 100\)'
if [ "$(statuses huge-lr)" = "3 3" ] && [ "$(lines huge-lr "$message")" -eq 1 ] &&
  [ "$(lines huge-lr '^\[rank 0/2 [^]]*\] error: the training loss')" -eq 1 ]; then
  ok "huge --lr: every rank exits 3, rank 0 says so once: $(grep -m1 -oE 'the training loss.*' "$work/huge-lr.log")"
else
  fail "huge --lr: statuses '$(statuses huge-lr)' (want 3 3), want one line '$message'" \
    "$(cat "$work/huge-lr.log")"
fi

# A NaN fed into step 8 (--test-nan-step 7) reaches the parameters; without --check-finite and
# with no loss logged, the checkpoint due at step 10 finds them.
nan=("${data[@]}" --hidden 64 --steps 20 --checkpoint-dir "$work/checkpoints" --checkpoint-every 5)
train nan-parameters "${nan[@]}" --log-every 0 --test-nan-step 7
message='error: parameter fc1\.weight\[0\] is nan at step 10: training diverged; try a lower --lr \(now 0\.1\); its checkpoint is not written'
if [ "$(statuses nan-parameters)" = "3 3" ] && [ "$(lines nan-parameters "$message")" -eq 1 ] &&
  [ "$(cat "$work/checkpoints/latest" 2>/dev/null)" = ckpt-00000005.h5 ] &&
  [ ! -e "$work/checkpoints/ckpt-00000010.h5" ]; then
  ok "NaN parameters: every rank exits 3 before the checkpoint of step 10; step 5's stays latest"
else
  fail "NaN parameters: statuses '$(statuses nan-parameters)' (want 3 3), checkpoints: $(ls "$work/checkpoints" | paste -sd' ')" \
    "$(cat "$work/nan-parameters.log")"
fi
train resumed "${nan[@]}" --log-every 0 --resume auto
if [ "$(statuses resumed)" = "0 0" ] && [ "$(lines resumed 'resuming from .*ckpt-00000005\.h5')" -eq 1 ] &&
  [ "$(lines resumed 'done: 15 steps')" -eq 1 ]; then
  ok "the checkpoint written before the NaN resumes and trains to the end"
else
  fail "resuming from step 5: statuses '$(statuses resumed)' (want 0 0)" "$(cat "$work/resumed.log")"
fi

# --check-finite skip drops the step of the NaN: its loss does not count in the logged one.
train skip "${data[@]}" --hidden 64 --steps 20 --test-nan-step 7 --check-finite skip --log-every 5
if [ "$(statuses skip)" = "0 0" ] && [ "$(lines skip 'skipping step 8: ')" -eq 1 ] &&
  [ "$(lines skip 'step 10/20 .* loss [0-9]')" -eq 1 ] && [ "$(lines skip 'diverged')" -eq 0 ]; then
  ok "--check-finite skip: the skipped step's NaN loss is left out of the logged loss"
else
  fail "--check-finite skip: statuses '$(statuses skip)' (want 0 0)" "$(cat "$work/skip.log")"
fi

# A tiny GPT on synthetic tokens: at --lr 1e-7 its loss stays at ln(97) = 4.5747.
gpt=(--model gpt --layers 1 --heads 2 --width 16 --context 16 --vocab 97 --synthetic
  --synthetic-size 960 --batch-size 4 --optimizer adamw --steps 200 --log-every 20)
warning='warning: the training loss has stayed at the chance level ln\(97\) = 4\.5747'
train stuck "${gpt[@]}" --lr 1e-7
if [ "$(statuses stuck)" = "0 0" ] && [ "$(lines stuck "$warning")" -eq 1 ] &&
  [ "$(lines stuck "^\[rank 0/2 [^]]*\] $warning from step 101 to 200")" -eq 1 ]; then
  ok "a GPT that cannot learn: one warning, by rank 0: $(grep -m1 -oE 'the training loss has.*' "$work/stuck.log")"
else
  fail "a GPT at --lr 1e-7: statuses '$(statuses stuck)' (want 0 0), want one '$warning'" \
    "$(cat "$work/stuck.log")"
fi
# learns NAME ARGS...: a run that learns is not warned about.
learns() {
  local name="$1"
  shift
  train "$name" "$@"
  if [ "$(statuses "$name")" = "0 0" ] && [ "$(lines "$name" 'chance level')" -eq 0 ] &&
    [ "$(lines "$name" 'step 200/200')" -eq 1 ]; then
    ok "$name learns: no chance-level warning"
  else
    fail "$name: statuses '$(statuses "$name")' (want 0 0), a warning or no step 200" \
      "$(cat "$work/$name.log")"
  fi
}
learns gpt-lr-0.002 "${gpt[@]}" --lr 0.002
learns mlp-lr-0.02 "${mlp[@]}" --steps 200 --lr 0.02

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
