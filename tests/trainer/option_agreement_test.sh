#!/usr/bin/env bash
# Ranks told different things stop at start, in seconds, with status 2 and one line naming the
# rank and the option, instead of training until the first checkpoint and deadlocking there;
# options allowed to differ per rank do not stop them. Also on 2 ranks: a --config folder is
# refused, and a RINGTRAIN_* variable that names no option is warned about once. The cases run 3
# at a time (tests/support/parallel_cases.sh): most of their time is mpirun's.
#   option_agreement_test.sh RINGTRAIN MPIEXEC [MPIEXEC_FLAGS...]
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
# shellcheck source=../support/parallel_cases.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/parallel_cases.sh"
bin="${1:?usage: option_agreement_test.sh RINGTRAIN MPIEXEC [FLAGS...]}"
mpiexec="${2:?usage: option_agreement_test.sh RINGTRAIN MPIEXEC [FLAGS...]}"
shift 2
flags=("$@")
common=(train --synthetic --hidden 16 --batch-size 8 --synthetic-size 512 --steps 40
  --log-every 0 --stall-timeout 20)

# ranks NAME STATUS PATTERN -- RANK0 ARGS... -- RANK1 ARGS...: one rank each (MPMD), exit STATUS
# within 30 s, output matching PATTERN (a grep -E regex).
ranks() {
  local name="$1" want="$2" pattern="$3" first=() second=() into=none started output status
  shift 3
  for word in "$@"; do
    if [ "$word" = -- ]; then [ "$into" = none ] && into=first || into=second; continue; fi
    if [ "$into" = first ]; then first+=("$word"); else second+=("$word"); fi
  done
  started=$SECONDS
  output="$(timeout 60 "$mpiexec" "${flags[@]}" -np 1 "$bin" "${common[@]}" "${first[@]}" \
    : -np 1 "$bin" "${common[@]}" "${second[@]}" 2>&1)"
  status=$?
  if [ "$status" -ne "$want" ]; then
    fail "$name: status $status, expected $want" "$output"
  elif [ $((SECONDS - started)) -gt 30 ]; then
    fail "$name: took $((SECONDS - started)) s" "$output"
  elif ! grep -qE -- "$pattern" <<<"$output"; then
    fail "$name: no /$pattern/" "$output"
  else
    ok "$name"
  fi
}

checkpoint_dir_on_rank_0() {
  ranks "--checkpoint-dir on rank 0 only" 2 \
    "error: rank 1 has --checkpoint-dir \(not given\) but rank 0 has \(given\)" \
    -- --checkpoint-dir "$work/only0" --
  if compgen -G "$work/only0/ckpt-*" >/dev/null; then
    fail "  a checkpoint was written before the refusal" "$(ls -l "$work/only0")"
  else
    ok "  and no checkpoint was written"
  fi
}
in_parallel checkpoint_dir_on_rank_0
in_parallel ranks "--checkpoint-every 50 on rank 0, 100 on rank 1" 2 \
  "error: rank 1 has --checkpoint-every 100 but rank 0 has 50" \
  -- --checkpoint-dir "$work/every" --checkpoint-every 50 -- --checkpoint-dir "$work/every" \
  --checkpoint-every 100
in_parallel ranks "--timeline on rank 1 only" 2 "error: rank 1 has --timeline \(given\) but rank 0 has \(not given\)" \
  -- -- --timeline "$work/trace.json"
in_parallel ranks "--checkpoint-dir at another path on each rank" 0 "done: 40 steps" \
  -- --checkpoint-dir "$work/a" -- --checkpoint-dir "$work/b"
in_parallel ranks "--log-level differs per rank" 0 "done: 40 steps" -- --log-level info -- --log-level warn

config_folder() {
  local started=$SECONDS output status
  output="$(timeout 60 "$mpiexec" "${flags[@]}" -np 2 "$bin" "${common[@]}" --config "$work" 2>&1)"
  status=$?
  if [ "$status" -eq 2 ] && grep -qF -- "--config $work: is a folder" <<<"$output" &&
    [ $((SECONDS - started)) -le 30 ]; then
    ok "--config FOLDER on 2 ranks: status 2, one line"
  else
    fail "--config FOLDER on 2 ranks: status $status" "$output"
  fi
}
in_parallel config_folder

unknown_variable() {
  local output status warnings
  output="$(RINGTRAIN_BATCHSIZE=0 timeout 60 "$mpiexec" "${flags[@]}" -np 2 "$bin" "${common[@]}" 2>&1)"
  status=$?
  warnings="$(grep -c "RINGTRAIN_BATCHSIZE names no option of ringtrain train: ignored (did you mean RINGTRAIN_BATCH_SIZE, --batch-size?)" <<<"$output")"
  if [ "$status" -eq 0 ] && [ "$warnings" -eq 1 ]; then
    ok "RINGTRAIN_BATCHSIZE on 2 ranks: warned about once, with the closest option"
  else
    fail "RINGTRAIN_BATCHSIZE on 2 ranks: status $status, $warnings warning(s)" "$output"
  fi
}
in_parallel unknown_variable
parallel_done
[ "$failures" -eq 0 ]
