#!/usr/bin/env bash
# `ringtrain export --format safetensors` and `ringtrain train --init-from` end to end, on 2 ranks:
#   - a GPT's and an MLP's export hold exactly the checkpoint's parameters (read by an independent
#     json+struct reader, the checkpoint by h5dump), the GPT's dense weights in Hugging Face's
#     Conv1D layout, no lm_head;
#   - a run started --init-from the file starts from those weights on every rank (one step at
#     lr 1e-30 leaves them as they were, where the same run without it does not);
#   - the GPT file in a PyTorch GPT-2 written with Hugging Face's layout gives ringtrain's loss;
#   - bad files and options (truncated, bad JSON, overlapping offsets, another dtype, a missing,
#     unexpected or differently shaped tensor, a NaN or infinite weight, a header over the readers'
#     limit, with --resume FILE) end the job with status 2 and one line naming the file, no hang;
#     a 2 GiB file of another model is refused from its header under a 1.5 GiB memory limit;
#   - export to a path that cannot be written names that path, not its temporary file.
# Independent runs go 3 at a time (tests/support/parallel_cases.sh): most of their time is mpirun's.
# Usage: safetensors_test.sh RINGTRAIN MPIEXEC [MPIEXEC FLAGS...]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ringtrain="$1"
shift
mpirun=("$@")
tool=(/usr/bin/python3 "$here/safetensors_tool.py")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
# shellcheck source=tests/support/parallel_cases.sh
source "$here/../support/parallel_cases.sh"

ok() { echo "ok   $1"; }
bad() {
  echo "FAIL $1"
  failures=$((failures + 1))
}
# run NAME COMMAND...: the command must succeed; its output is kept in $work/NAME.out.
run() {
  local name="$1"
  shift
  if "$@" >"$work/$name.out" 2>&1; then
    ok "$name"
  else
    bad "$name: status $?"
    sed 's/^/     | /' "$work/$name.out"
  fi
}
# The GPT's options but --layers and --width, which the mismatch cases change.
gpt_sized=(--model gpt --heads 2 --context 8 --vocab 64 --synthetic --synthetic-size 256
           --batch-size 4 --log-every 0 --eval-every 0)
gpt=("${gpt_sized[@]}" --layers 2 --width 16)
mlp=(--model mlp --hidden 12,10 --synthetic --synthetic-shape 1,6,6 --synthetic-size 256
     --batch-size 4 --log-every 0 --eval-every 0)
train() { timeout 120 "${mpirun[@]}" -np 2 "$ringtrain" train "$@"; }

# ---- Export: the file holds the checkpoint's parameters ----------------------------------------
export_model() {
  local model="$1"
  local -n options="$model"
  run "$model-train" train "${options[@]}" --optimizer adamw --lr 0.01 --steps 3 \
    --checkpoint-dir "$work/$model"
  run "$model-export" "$ringtrain" export --format safetensors "$work/$model" "$work/$model.st"
  run "$model-matches-checkpoint" "${tool[@]}" check-against-checkpoint "$work/$model.st" \
    "$work/$model/ckpt-00000003.h5"
  cat "$work/$model-matches-checkpoint.out"
}
for model in gpt mlp; do in_parallel export_model "$model"; done
parallel_done
if grep -q "(8 transposed)" "$work/gpt-matches-checkpoint.out" &&
  grep -q "(0 transposed)" "$work/mlp-matches-checkpoint.out"; then
  ok "the GPT's 8 block weights are transposed, none of the MLP's"
else
  bad "transposed tensors: $(cat "$work/gpt-matches-checkpoint.out" "$work/mlp-matches-checkpoint.out")"
fi

# ---- --init-from: every rank starts from the file ----------------------------------------------
# start_from MODEL init|fresh: one step at lr 1e-30 from the file or from a fresh start, exported.
start_from() {
  local model="$1" start="$2" init=()
  local -n options="$model"
  [ "$start" = init ] && init=(--init-from "$work/$model.st")
  run "$model-$start-train" train "${options[@]}" --optimizer sgd --momentum 0 --lr 1e-30 \
    --steps 1 --seed 7 "${init[@]}" --checkpoint-dir "$work/$model-$start"
  run "$model-$start-export" "$ringtrain" export "$work/$model-$start" "$work/$model-$start.st"
}
for model in gpt mlp; do
  for start in init fresh; do in_parallel start_from "$model" "$start"; done
done
# With --resume auto the file starts a run whose folder has no checkpoint yet; once it has one,
# the run continues from it and the file is not read (a damaged one does not matter then).
head -c 100 "$work/gpt.st" >"$work/damaged.st"
resume_auto() {
  run "auto-first-start" train "${gpt[@]}" --steps 1 --resume auto --checkpoint-dir "$work/auto" \
    --init-from "$work/gpt.st"
  run "auto-continues" train "${gpt[@]}" --steps 2 --resume auto --checkpoint-dir "$work/auto" \
    --init-from "$work/damaged.st"
}
in_parallel resume_auto

# ---- The GPT file in a PyTorch GPT-2 (Hugging Face's layout) gives ringtrain's loss ------------
# Every window of this corpus is the same 9 tokens, so the loss ringtrain logs at step 1 (before
# its update) is the loss of that window under the file's weights, whichever windows a rank draws.
window=(5 17 3 42 9 60 1 33 5)
mkdir -p "$work/tokens"
for split in train val; do
  /usr/bin/python3 - "$work/tokens/x_$split.bin" "${window[@]:0:8}" <<'PY'
import struct, sys
period = [int(t) for t in sys.argv[2:]]
ids = period * 64 + period[:1]
header = [20240520, 1, len(ids)] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *header) + struct.pack("<%dH" % len(ids), *ids))
PY
done
real=(--model gpt --layers 2 --heads 2 --width 16 --context 8 --vocab 64 --data "$work/tokens"
      --batch-size 4 --eval-every 0)
learned_loss() {
  run "gpt-learn-window" train "${real[@]}" --log-every 0 --optimizer adamw --lr 0.01 --steps 30 \
    --checkpoint-dir "$work/learned"
  run "gpt-learned-export" "$ringtrain" export "$work/learned" "$work/learned.st"
  run "gpt-learned-loss" train "${real[@]}" --log-every 1 --optimizer sgd --momentum 0 --lr 1e-30 \
    --steps 1 --init-from "$work/learned.st"
}
in_parallel learned_loss
parallel_done

for model in gpt mlp; do
  # lr 1e-30 moves a weight of the file by far less than its last bit, a zero bias to ~1e-30.
  run "$model-init-from-keeps-the-weights" "${tool[@]}" compare "$work/$model.st" \
    "$work/$model-init.st" 1e-25
  run "$model-fresh-start-differs" "${tool[@]}" differ "$work/$model.st" "$work/$model-fresh.st" 1e-3
done
grep -q "initial weights from $work/gpt.st" "$work/gpt-init-train.out" &&
  ok "rank 0 says where the weights come from" || bad "no 'initial weights from' line"
if grep -q "initial weights from" "$work/auto-first-start.out" &&
  grep -q "resuming from $work/auto/ckpt-00000001.h5" "$work/auto-continues.out" &&
  ! grep -q "initial weights from" "$work/auto-continues.out"; then
  ok "--resume auto: --init-from at the first start only"
else
  bad "--resume auto with --init-from: $(grep -h "initial weights\|resuming" "$work"/auto-*.out)"
fi
ours="$(grep -oE 'step 1/1 .* loss [0-9.]+' "$work/gpt-learned-loss.out" | awk '{print $NF}')"
torch_out="$(/usr/bin/python3 "$here/gpt2_torch_loss.py" "$work/learned.st" 2 "${window[@]}")"
case $? in
  77) echo "skip PyTorch comparison: $torch_out" ;;
  0)
    read -r theirs wrong <<<"$torch_out"
    if awk -v a="$ours" -v b="$theirs" -v w="$wrong" \
      'BEGIN { d = a - b; e = w - b; exit !(a != "" && d * d < 2e-4 * 2e-4 && e * e > 1e-2 * 1e-2) }'; then
      ok "PyTorch GPT-2 loss $theirs = ringtrain's $ours (c_proj read {out, in}: $wrong)"
    else
      bad "PyTorch GPT-2 loss $theirs, ringtrain's '$ours', c_proj read {out, in}: $wrong"
    fi
    ;;
  *) bad "gpt2_torch_loss.py: $torch_out" ;;
esac

# ---- Bad files and options: status 2, one line naming the file, on 2 ranks ---------------------
# expect NAME PATTERN TRAIN-OPTIONS... (its file made before it starts: the cases run 3 at a time)
expect() {
  local name="$1" pattern="$2" start=$SECONDS output status count
  shift 2
  output="$(train "$@" 2>&1)"
  status=$?
  count="$(grep -c -E "error: .*($pattern)" <<<"$output")"
  if [ "$status" -eq 2 ] && [ "$count" -eq 1 ] && [ $((SECONDS - start)) -lt 60 ]; then
    ok "$name: $(grep -m1 -E "error: .*($pattern)" <<<"$output")"
  else
    bad "$name: status $status (want 2), message seen $count times (want 1)"
    sed 's/^/     | /' <<<"$output"
  fi
}
st="$work/gpt.st"
head -c 1000 "$st" >"$work/truncated.st"
in_parallel expect "truncated" "truncated.st: header length [0-9]+ does not fit" "${gpt[@]}" --steps 1 \
  --init-from "$work/truncated.st"
head -c -8 "$st" >"$work/short.st"
in_parallel expect "data cut short" "short.st: .*outside the [0-9]+ bytes of data" "${gpt[@]}" --steps 1 \
  --init-from "$work/short.st"
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a": [1, 2,    ' >"$work/badjson.st"
in_parallel expect "bad JSON" "badjson.st: the header is not valid JSON" "${gpt[@]}" --steps 1 \
  --init-from "$work/badjson.st"
"${tool[@]}" overlap "$st" "$work/overlap.st"
in_parallel expect "overlapping offsets" "overlap.st: tensor .* overlapping" "${gpt[@]}" --steps 1 \
  --init-from "$work/overlap.st"
"${tool[@]}" without "$st" "$work/missing.st" h.1.mlp.c_fc.bias
in_parallel expect "missing tensor" "missing.st: has no parameter h.1.mlp.c_fc.bias" "${gpt[@]}" --steps 1 \
  --init-from "$work/missing.st"
"${tool[@]}" dtype "$st" "$work/int.st" wpe.weight I32
in_parallel expect "another dtype" "int.st: tensor wpe.weight is I32; ringtrain reads F32 tensors only" \
  "${gpt[@]}" --steps 1 --init-from "$work/int.st"
in_parallel expect "wider model" "gpt.st: parameter wte.weight is 64x16 but the model's is 64x32" \
  "${gpt_sized[@]}" --layers 2 --width 32 --steps 1 --init-from "$st"
in_parallel expect "unexpected tensor" "gpt.st: has parameter h.1.ln_1.weight, which the model does not" \
  "${gpt_sized[@]}" --layers 1 --width 16 --steps 1 --init-from "$st"
in_parallel expect "another model" "mlp.st: has no parameter wte.weight" "${gpt[@]}" --steps 1 \
  --init-from "$work/mlp.st"
in_parallel expect "no such file" "nothing.st: no such file" "${gpt[@]}" --steps 1 --init-from "$work/nothing.st"
"${tool[@]}" value "$st" "$work/nan.st" h.0.attn.c_proj.weight 5 nan
in_parallel expect "a NaN weight" "nan.st: tensor h.0.attn.c_proj.weight holds NaN at index 5" "${gpt[@]}" \
  --steps 1 --init-from "$work/nan.st"
"${tool[@]}" value "$st" "$work/inf.st" wte.weight 0 -inf
in_parallel expect "an infinite weight" "inf.st: tensor wte.weight holds an infinite value at index 0" \
  "${gpt[@]}" --steps 1 --init-from "$work/inf.st"
# A header over the readers' 100 MB limit, in a file that holds it: the limit is the reason.
"${tool[@]}" long-header "$work/long.st" 200000000
in_parallel expect "a header over the limit" \
  "long.st: header length 200000000 is over the 100000000-byte limit of safetensors readers" \
  "${gpt[@]}" --steps 1 --init-from "$work/long.st"
# A 2 GiB file (sparse) of another model, under a 1.5 GiB address-space limit (an Open MPI rank
# maps about 1 GiB before it trains: its components' libraries): refused from its header, within
# seconds, without reading (or allocating) its data. The same job without the file trains under
# the limit, so the refusal is for the reason it names.
"${tool[@]}" sparse "$work/huge.st" wte.weight 2147483648
(
  ulimit -v $((3 << 19))
  if ! out="$(train "${gpt[@]}" --device cpu --steps 1 2>&1)"; then
    bad "the GPT does not train under a 1.5 GiB address-space limit"
    sed 's/^/     | /' <<<"$out"
  fi
  expect "a 2 GiB file under a 1.5 GiB memory limit" \
    "huge.st: parameter wte.weight is 536870912 but the model's is 64x16" "${gpt[@]}" \
    --device cpu --steps 1 --init-from "$work/huge.st"
  exit "$failures"
) || failures=$((failures + 1))
in_parallel expect "with --resume FILE" "--init-from starts a new run and --resume" "${gpt[@]}" --steps 1 \
  --init-from "$st" --resume "$work/gpt/ckpt-00000003.h5"
parallel_done
# The export command refuses as plainly.
if out="$("$ringtrain" export --format onnx "$work/gpt" "$work/x.st" 2>&1)"; then
  bad "export --format onnx succeeded"
else
  grep -q "the only format is safetensors" <<<"$out" && ok "export --format onnx: $out" ||
    bad "export --format onnx: $out"
fi
# OUT that cannot be written is named as given, not by its temporary.
if out="$("$ringtrain" export "$work/gpt" "$work/no/such/folder/x.st" 2>&1)"; then
  bad "export into a missing folder succeeded"
else
  [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "^ringtrain export: $work/no/such/folder/x.st: " <<<"$out" &&
    ok "export into a missing folder: $out" || bad "export into a missing folder: $out"
fi
if out="$("$ringtrain" export "$work/truncated.st" "$work/x.st" 2>&1)"; then
  bad "export of a non-checkpoint succeeded"
else
  [ "$(wc -l <<<"$out")" -eq 1 ] && ok "export of a non-checkpoint: $out" ||
    bad "export of a non-checkpoint: $out"
fi

[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
[ "$failures" -eq 0 ]
