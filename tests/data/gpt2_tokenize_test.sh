#!/usr/bin/env bash
# gpt2_tokenize as a program, on a tiny byte-level vocabulary (tiny_vocab.sh): the token file's
# header and ids, the round trip back to text, info's counts and entropy, and one line naming the
# file for each error.
#   gpt2_tokenize_test.sh GPT2_TOKENIZE
set -uo pipefail
tool="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/data/tiny_vocab.sh
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.sh"
write_tiny_vocab "$work/vocab"
# shellcheck source=tests/data/script_test_support.sh
source "$(dirname "${BASH_SOURCE[0]}")/script_test_support.sh"

run() { expect_status "$1" "$tool" "${@:2}"; }
# The little-endian uint16 ids of a token file, after its 1024-byte header, one per line.
ids_of() { od -An -v -tu2 -j1024 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }

# "the" is one token (257); " other" is Ġ o the r; "<|endoftext|>" is 259 only with --special.
printf 'the other<|endoftext|>' >"$work/a.txt"
run 0 encode --vocab "$work/vocab" --special --out "$work/a.bin" "$work/a.txt"
check "encode reports the count" output_is "gpt2_tokenize: $work/a.bin: 6 tokens from 22 bytes of text in 1 file(s)"
check "llm.c header: magic 20240520, version 1, 6 tokens" \
  test "$(od -An -tx1 -N12 "$work/a.bin" | tr -d ' \n')" = 88d834010100000006000000
check "ids" test "$(ids_of "$work/a.bin" | tr '\n' ' ')" = "257 32 111 257 114 259 "
run 0 encode --vocab "$work/vocab" --out "$work/b.bin" "$work/a.txt"
check "without --special the text stays text" test "$(ids_of "$work/b.bin" | wc -l)" = 18

# Text with multi-byte characters, newlines and runs of spaces comes back unchanged.
printf 'naïve café 🙂\n\n  two  spaces\tand the end  \n' >"$work/c.txt"
run 0 encode --vocab "$work/vocab" --out "$work/c.bin" "$work/c.txt" "$work/a.txt"
run 0 decode --vocab "$work/vocab" --out "$work/c.back" "$work/c.bin"
check "round trip of two files" cmp -s "$work/c.back" <(cat "$work/c.txt" "$work/a.txt")
run 0 decode --vocab "$work/vocab" "$work/a.bin"
check "decode to standard output" output_is "the other<|endoftext|>"

# info: 6 tokens, 5 distinct (257 twice): entropy = 4 x (1/6) ln 6 + (1/3) ln 3 = 1.5607 nats.
run 0 info --vocab "$work/vocab" "$work/a.bin"
check "info" output_is "$work/a.bin: 6 tokens, 5 distinct ids, unigram entropy 1.5607 nats"

# Errors: one line naming the file, exit status 1.
printf 'ok \xff' >"$work/bad.txt"
run 1 encode --vocab "$work/vocab" --out "$work/bad.bin" "$work/bad.txt"
check "invalid UTF-8 names the file and byte" \
  output_is "gpt2_tokenize: error: $work/bad.txt: text is not valid UTF-8 at byte 3 (UTF-8 error: illegal byte (0xfe or 0xff))"
check "nothing written on error" test ! -e "$work/bad.bin"
write_tiny_vocab "$work/small"
sed -i 's/, "<|endoftext|>": 259//' "$work/small/encoder.json"
run 1 decode --vocab "$work/small" "$work/a.bin"
check "id outside the vocabulary names the file and position" \
  output_is "gpt2_tokenize: error: $work/a.bin: token 259 at position 5 is outside the vocabulary of 259"
run 1 encode --vocab "$work/none" --out "$work/x.bin" "$work/a.txt"
check "missing vocabulary names the file" output_is "gpt2_tokenize: error: $work/none/encoder.json: no such file"
run 1 info --vocab "$work/vocab" "$work/a.txt"
check "a text file is no token file" grep -qF "$work/a.txt: wrong magic" "$work/out"

# Usage: exit status 2; --help: exit status 0 with the modes explained.
run 2
run 2 encode --vocab "$work/vocab" "$work/a.txt"
run 2 decode "$work/a.bin" "$work/b.bin"
run 2 info --out "$work/y" "$work/a.bin"
run 2 translate "$work/a.txt"
run 0 --help
check "--help explains the modes" grep -qF "unigram" "$work/out"

finish gpt2_tokenize
