#!/usr/bin/env bash
# `ringtrain eval` against the training run that wrote the weights: short runs on 2 ranks (an MLP
# on synthetic images, a tiny GPT on synthetic tokens, linreg) write checkpoints; eval of each, on
# 1 rank and on 2, prints the figures of the run's last evaluation line to the same digits, and
# its --json holds them; the MLP's exported safetensors file (--init-from) gives them too. Bad
# input (no such file, weights of another model, no weights named) ends every rank with status 2
# and one line. Also the usage: `ringtrain --help` lists eval, `eval --help` and `check --help`
# exit 0.
#   eval_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
# shellcheck source=../../scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/args.sh"
ringtrain_test_start checks
ringtrain="$1"
shift
mpirun=("$@")

# figures FILE: the last evaluation line of FILE from its kind on, without the epoch, which only
# training knows: "Accuracy at step 30: 0.5150  (test loss 1.2021, 200 test samples)".
figures() {
  grep -E "(Accuracy|Validation loss|Test loss) at step" "$1" | tail -1 |
    sed -E 's/.*((Accuracy|Validation loss|Test loss) at step)/\1/; s/epoch [0-9]+, //'
}

# trained NAME TRAIN-ARGS...: trains on 2 ranks into $work/NAME, the log in $work/NAME.train.
trained() {
  local name="$1"
  shift
  if timeout 120 "${mpirun[@]}" -np 2 "$ringtrain" train --log-every 0 --checkpoint-dir "$work/$name" \
    "$@" >"$work/$name.train" 2>&1 && [ -n "$(figures "$work/$name.train")" ]; then
    ok "$name: trained, last evaluation: $(figures "$work/$name.train")"
  else
    fail "$name: training" "$(cat "$work/$name.train")"
    return 1
  fi
}

# evaluated NAME RANKS EVAL-ARGS...: eval on RANKS ranks prints the training log's figures.
evaluated() {
  local name="$1" ranks="$2" out="$work/$1.eval$2"
  shift 2
  timeout 120 "${mpirun[@]}" -np "$ranks" "$ringtrain" eval "$@" >"$out" 2>&1
  local status=$? want got
  want="$(figures "$work/$name.train")"
  got="$(figures "$out")"
  if [ "$status" -eq 0 ] && [ -n "$got" ] && [ "$got" = "$want" ]; then
    ok "$name: eval on $ranks rank(s) $*: $got"
  else
    fail "$name: eval on $ranks rank(s): status $status, '$got', want '$want'" "$(cat "$out")"
  fi
}

mlp=(--model mlp --hidden 16 --synthetic --synthetic-shape 1,8,8 --synthetic-size 1200 --batch-size 16
  --steps 30 --lr 0.05)
gpt=(--model gpt --layers 1 --heads 2 --width 16 --context 8 --vocab 64 --synthetic --synthetic-size 256
  --batch-size 4 --steps 6 --optimizer adamw --lr 0.01)
if trained mlp "${mlp[@]}"; then
  evaluated mlp 1 --checkpoint "$work/mlp"
  evaluated mlp 2 --checkpoint "$work/mlp/ckpt-00000030.h5" --json "$work/mlp.json"
  if python3 - "$work/mlp.json" "$(figures "$work/mlp.train")" <<'PY'; then
import json, re, sys
d = json.load(open(sys.argv[1]))
accuracy, loss, samples = re.search(r": ([0-9.]+)  \(test loss ([0-9.]+), (\d+) test", sys.argv[2]).groups()
sys.exit(not (f"{d['accuracy']:.4f}" == accuracy and f"{d['loss']:.4f}" == loss and
              d["samples"] == int(samples) and d["step"] == 30 and d["ranks"] == 2))
PY
    ok "mlp: --json holds the accuracy, loss, samples, step and ranks"
  else
    fail "mlp: --json" "$(cat "$work/mlp.json")"
  fi
  # The exported weights carry the configuration: --init-from evaluates the same.
  if "$ringtrain" export --format safetensors "$work/mlp" "$work/mlp.safetensors" >/dev/null 2>&1; then
    evaluated mlp 2 --init-from "$work/mlp.safetensors"
  else
    fail "mlp: export"
  fi
fi
if trained gpt "${gpt[@]}"; then
  evaluated gpt 1 --checkpoint "$work/gpt"
  evaluated gpt 2 --checkpoint "$work/gpt" --json "$work/gpt.json"
  if python3 -c 'import json, math, sys; d = json.load(open(sys.argv[1])); sys.exit(abs(d["perplexity"] - math.exp(d["loss"])) > 1e-9)' "$work/gpt.json"; then
    ok "gpt: --json holds the perplexity"
  else
    fail "gpt: --json perplexity" "$(cat "$work/gpt.json")"
  fi
fi
if trained linreg --model linreg --steps 20 --lr 0.01; then
  evaluated linreg 2 --checkpoint "$work/linreg"
fi

# refused NAME PATTERN EVAL-ARGS...: 2 ranks, each in a wrapper that prints its status (and exits
# 0, so that mpirun does not end the other first): both 2, PATTERN on one line, once, in time.
refused() {
  local name="$1" pattern="$2" output count statuses start=$SECONDS
  shift 2
  # shellcheck disable=SC2016  # expanded by the rank's shell
  output="$(timeout 60 "${mpirun[@]}" -np 2 bash -c '"$0" eval "$@"; echo "rank-exit $?"' "$ringtrain" "$@" 2>&1)"
  count="$(grep -c -E "$pattern" <<<"$output")"
  statuses="$(grep '^rank-exit' <<<"$output" | sort | uniq -c | tr -s ' ')"
  if [ "$statuses" = " 2 rank-exit 2" ] && [ "$count" -eq 1 ] && [ $((SECONDS - start)) -lt 30 ]; then
    ok "refused, $name: $(grep -m1 -E "$pattern" <<<"$output")"
  else
    fail "refused, $name: statuses '$statuses' (want 2 on both ranks), message seen $count times" "$output"
  fi
}
refused "no such checkpoint" "$work/none.*(no checkpoint|no such file|No such file|does not exist|cannot)" --checkpoint "$work/none.h5"
refused "no such safetensors file" "$work/none.safetensors" --init-from "$work/none.safetensors"
refused "no weights named" "give one of --checkpoint FILE\|FOLDER and --init-from FILE" --data "$work"
if [ -d "$work/mlp" ]; then
  refused "another model's sizes" "ckpt-00000030.h5.*fc1" --checkpoint "$work/mlp" --hidden 32
  # --config replaces the saved configuration: a CNN's, which the MLP's weights do not fit.
  printf 'model = cnn\nsynthetic = true\nsynthetic-shape = 1,8,8\n' >"$work/cnn.conf"
  refused "an MLP checkpoint as a CNN" "ckpt-00000030.h5" --checkpoint "$work/mlp" --config "$work/cnn.conf"
fi

# The usage.
output="$("$ringtrain" --help 2>&1)"
check "ringtrain --help lists eval and links the exit statuses" "$output" "  eval " \
  "docs/options.md#exit-statuses"
output="$("$ringtrain" eval --help 2>&1)"
status=$?
if [ "$status" -eq 0 ] && grep -q -- "--checkpoint" <<<"$output"; then ok "eval --help: exit 0, the options"; else fail "eval --help: status $status" "$output"; fi
output="$("$ringtrain" check --help 2>&1)"
status=$?
if [ "$status" -eq 0 ] && grep -q "usage: ringtrain check" <<<"$output"; then ok "check --help: exit 0, the usage"; else fail "check --help: status $status" "$output"; fi
"$ringtrain" check >/dev/null 2>&1
status=$?
if [ "$status" -eq 2 ]; then ok "check without a file: exit 2"; else fail "check without a file: status $status"; fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
