#!/usr/bin/env bash
# data/prepare_fortunes.sh on a fake fortunes folder with a tiny vocabulary (tiny_vocab.sh), and
# with --sample on the real corpus when Debian's fortunes and GPT-2's vocabulary are installed.
#   prepare_fortunes_test.sh PREPARE_SCRIPT BUILD_DIR GPT2_VOCAB_DIR
# BUILD_DIR must hold bin/gpt2_tokenize. Prints each failed check; exits non-zero if any.
set -uo pipefail
script="$1"
build="$2"
gpt2_vocab="$3"
tool="$build/bin/gpt2_tokenize"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/data/script_test_support.sh
source "$(dirname "${BASH_SOURCE[0]}")/script_test_support.sh"
# shellcheck source=tests/data/tiny_vocab.sh
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.sh"
write_tiny_vocab "$work/vocab"

prepare() { expect_status "$1" bash "$script" --build-dir "$build" --vocab "$work/vocab" "${@:2}"; }
decoded() { "$tool" decode --vocab "$work/vocab" "$1"; }
# How many times the tiny vocabulary's <|endoftext|> (259) is in a token file.
separators() { od -An -v -tu2 -j1024 "$1" | tr -s ' ' '\n' | grep -cx 259; }

# The fake folder: three listed files with 7 + 8 + 10 fortunes (art also holds a blank one before
# its last; no file closes its last fortune with %), an index file, and an unlisted file and
# folder that must be ignored.
count_of() { case "$1" in art) echo 7 ;; computers) echo 8 ;; *) echo 10 ;; esac; }
saying() {
  case "$1" in
    art) if [ "$2" = 7 ]; then echo "the end"; else echo "naïve café 🙂"; fi ;;
    computers) echo there ;;
    *) echo other ;;
  esac
}
fortune() { printf 'fortune %d of %s\n  says %s\n' "$2" "$1" "$(saying "$1" "$2")"; }
mkdir -p "$work/fortunes/off"
for name in art computers zippy; do
  last="$(count_of "$name")"
  for k in $(seq 1 "$last"); do
    [ "$name/$k" != art/7 ] || printf '  \n%%\n'
    fortune "$name" "$k"
    [ "$k" = "$last" ] || echo %
  done >"$work/fortunes/$name"
done
printf 'not a fortune\n' >"$work/fortunes/art.dat"
printf 'ignored\n%%\n' | tee "$work/fortunes/notlisted" >"$work/fortunes/off/art"

# The expected sets of the first LIMIT fortunes, numbered from 1 over art, computers, zippy:
# every 10th validates; <|endoftext|> between the fortunes of a set.
expected_sets() {
  local limit="$1" n=0 name k text train="" val=""
  for name in art computers zippy; do
    for k in $(seq 1 "$(count_of "$name")"); do
      n=$((n + 1))
      [ "$n" -le "$limit" ] || break 2
      text="$(fortune "$name" "$k")"$'\n'
      if [ $((n % 10)) -eq 0 ]; then
        val+="${val:+<|endoftext|>}$text"
      else
        train+="${train:+<|endoftext|>}$text"
      fi
    done
  done
  printf '%s' "$train" >"$work/expected_train.txt"
  printf '%s' "$val" >"$work/expected_val.txt"
}

# All 25 fortunes: 23 to train, fortunes 10 and 20 to validation.
prepare 0 --fortunes-dir "$work/fortunes" --out "$work/a"
check "progress names k of n files" output_has "[3 of 3 files] zippy: 10 fortunes (25 so far)"
check "counts printed" output_has "validation: 2 fortunes, "
check "progress names k of n tokenised splits" output_has "[2 of 2 splits] tokenising the val text"
expected_sets 25
check "train text" cmp -s <(decoded "$work/a/fortunes_train.bin") "$work/expected_train.txt"
check "validation text" cmp -s <(decoded "$work/a/fortunes_val.bin") "$work/expected_val.txt"
check "train: <|endoftext|> between 23 fortunes" test "$(separators "$work/a/fortunes_train.bin")" = 22
check "validation: one <|endoftext|>" test "$(separators "$work/a/fortunes_val.bin")" = 1
check "source recorded" grep -qF "25 fortunes of 3 of 43 files (art computers zippy)" "$work/a/FORTUNES_SOURCE.txt"
check "no staging folder left" test -z "$(compgen -G "$work/a/.prepare_fortunes.*")"

# A second run does nothing; a changed fortune file is prepared again.
before="$(checksums "$work/a")"
prepare 0 --fortunes-dir "$work/fortunes" --out "$work/a"
check "second run: up to date" output_has "prepared and up to date; nothing to do"
check "second run changes nothing" test "$before" = "$(checksums "$work/a")"
printf '%%\nfortune 11 of zippy\n' >>"$work/fortunes/zippy"
prepare 0 --fortunes-dir "$work/fortunes" --out "$work/a"
check "changed input: prepared again" output_has "26 so far"

# --sample 12: the first 12 fortunes (art's 7 and 5 of computers), fortune 10 validates.
prepare 0 --fortunes-dir "$work/fortunes" --out "$work/b" --sample 12
check "sample: stops after two files" output_has "[2 of 3 files] computers: 5 fortunes (12 so far)"
expected_sets 12
check "sample: train text" cmp -s <(decoded "$work/b/fortunes_train.bin") "$work/expected_train.txt"
check "sample: validation text" cmp -s <(decoded "$work/b/fortunes_val.bin") "$work/expected_val.txt"

# Errors: one line, exit status 1, nothing left behind.
prepare 1 --fortunes-dir "$work/fortunes" --out "$work/c" --sample 9
check "fewer than 10 fortunes: said" output_has "fewer than 10 leave the validation set empty"
check "fewer than 10 fortunes: no folder left" test ! -e "$work/c"
mkdir -p "$work/empty"
prepare 1 --fortunes-dir "$work/empty" --out "$work/c"
check "no fortune files: said" output_has "no fortune files in $work/empty"
expect_status 1 bash "$script" --build-dir "$work/nobuild" --fortunes-dir "$work/fortunes" \
  --vocab "$work/vocab" --out "$work/c"
check "tool not built: named" output_has "$work/nobuild/bin/gpt2_tokenize is not built"
expect_status 2 bash "$script" --sample 0
expect_status 2 bash "$script" --out

# The real corpus, a sample of it, with GPT-2's vocabulary.
if [ ! -f /usr/share/games/fortunes/fortunes ]; then
  echo "skipped the real corpus: Debian's fortunes package is not installed (/usr/share/games/fortunes/fortunes)"
elif [ ! -f "$gpt2_vocab/encoder.json" ] || [ ! -f "$gpt2_vocab/vocab.bpe" ]; then
  echo "skipped the real corpus: no GPT-2 vocabulary in $gpt2_vocab (data/fetch_gpt2_vocab.sh fetches it)"
else
  expect_status 0 bash "$script" --build-dir "$build" --vocab "$gpt2_vocab" --out "$work/real" --sample 300
  check "real: 30 validation fortunes" output_has "validation: 30 fortunes, "
  for set in train val; do
    expect_status 0 "$tool" info --vocab "$gpt2_vocab" "$work/real/fortunes_$set.bin"
    check "real: fortunes_$set.bin is a valid token file" output_has " tokens, "
  done
fi

finish prepare_fortunes.sh
