#!/usr/bin/env bash
# shellcheck disable=SC2154  # the options' variables are set by ringtrain_opt (args.sh)
# Prepares the GPT corpus: the English fortunes of Debian's `fortunes` package as token files in
# llm.c's format, for `ringtrain train --data DIR` with a token model.
#   data/prepare_fortunes.sh [--out DIR] [--sample N] [--build-dir DIR] [--fortunes-dir DIR]
#                            [--vocab DIR]
#
#   1. installs the `fortunes` package through apt when its files are missing (only for the
#      default --fortunes-dir, /usr/share/games/fortunes);
#   2. takes the fortune files listed below, in that order: the text files of Debian 12's
#      `fortunes` and `fortunes-min` (not the .dat/.u8 index files, not the offensive ones of
#      `fortunes-off` under off/, not other languages' folders), those of them that are there;
#   3. cuts each file into fortunes at its lines that are a single '%'; blank fortunes are
#      dropped. The fixed rule: counting the fortunes of all files in order from 1, every 10th
#      (10, 20, 30, ...) goes to validation, the others to training. --sample N keeps only the
#      first N fortunes (CI);
#   4. joins each set's fortunes with <|endoftext|> (GPT-2's token 50256) between them, tokenises
#      it with GPT-2's tokenizer (gpt2_tokenize encode --special; the vocabulary comes from
#      --vocab, fetched by data/fetch_gpt2_vocab.sh when missing) and writes DIR/fortunes_train.bin
#      and DIR/fortunes_val.bin, then prints both token counts and the validation tokens' unigram
#      entropy in nats (gpt2_tokenize info).
# DIR/FORTUNES_SOURCE.txt records what was prepared and a hash of every input (the fortune files,
# the vocabulary, --sample, the rule); when it matches, the script says the corpus is up to date
# and does nothing. Everything is made in a staging folder inside DIR and renamed into place.
#
# Defaults: --out <repo>/data/fortunes, --build-dir $RINGTRAIN_BUILD_DIR or <repo>/build (for
# bin/gpt2_tokenize), --fortunes-dir /usr/share/games/fortunes, --vocab <repo>/data/gpt2.
# Errors: one line, exit status 1; bad arguments: one line, exit status 2 (--help: the options).
set -euo pipefail
# args.sh (and the common.sh it sources): the checkout's scripts/lib, or, installed (cmake
# --install puts this script in PREFIX/share/ringtrain/data), PREFIX/share/ringtrain/scripts/lib.
# shellcheck source=scripts/lib/args.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/args.sh"
root="$ringtrain_root"

# The English fortune files of Debian 12's fortunes (1:1.99.1-7.3) and fortunes-min, in order.
fortune_files=(
  art ascii-art computers cookie debian definitions disclaimer drugs education ethnic food
  fortunes goedel humorists kids knghtbrd law linux linuxcookie literature love magic medicine
  men-women miscellaneous news paradoxum people perl pets platitudes politics pratchett riddles
  science songs-poems sports startrek tao translate-me wisdom work zippy
)
# Changing how the corpus is cut or joined must change this, so that old outputs are redone.
rule="fortunes v1: '%' lines separate, blank dropped, every 10th to validation, <|endoftext|> between"
default_fortunes_dir=/usr/share/games/fortunes

fail() {
  ringtrain_say "error: $*"
  exit 1
}

ringtrain_opt --out out "$root/data/fortunes" "the folder of fortunes_train.bin, fortunes_val.bin and FORTUNES_SOURCE.txt" nonempty
ringtrain_opt --sample sample "" "only the first SAMPLE fortunes (CI; default: all)" nonempty
ringtrain_opt --build-dir build_dir "$(ringtrain_default_build_dir)" "the build folder whose bin/ holds gpt2_tokenize" nonempty
ringtrain_opt --fortunes-dir fortunes_dir "$default_fortunes_dir" "the fortune files (only the default installs the fortunes package)" nonempty
ringtrain_opt --vocab vocab "$root/data/gpt2" "GPT-2's encoder.json and vocab.bpe (fetched when missing)" nonempty
ringtrain_parse_args "$@"
if [ -n "$sample" ] && [[ ! "$sample" =~ ^[1-9][0-9]*$ ]]; then
  echo "${0##*/}: --sample '$sample': expected a positive whole number (see --help)" >&2
  exit 2
fi
tool="$build_dir/bin/gpt2_tokenize"

# ---- What goes in ---------------------------------------------------------------------------
[ -x "$tool" ] || fail "$tool is not built; build it first (cmake --build $build_dir --target gpt2_tokenize) or pass --build-dir"

# The listed files that are in $fortunes_dir, into the array `taken`.
find_fortune_files() {
  local name
  taken=()
  for name in "${fortune_files[@]}"; do
    [ -f "$fortunes_dir/$name" ] && taken+=("$name")
  done
  return 0
}
find_fortune_files
if [ "${#taken[@]}" -eq 0 ] && [ "$fortunes_dir" = "$default_fortunes_dir" ]; then
  ringtrain_say "the fortunes package is not installed; installing it"
  ringtrain_install_packages fortunes || true
  find_fortune_files
fi
[ "${#taken[@]}" -gt 0 ] ||
  fail "no fortune files in $fortunes_dir (none of the ${#fortune_files[@]} this script lists); install Debian's fortunes package (apt-get install fortunes) or pass --fortunes-dir"
if [ ! -f "$vocab/encoder.json" ] || [ ! -f "$vocab/vocab.bpe" ]; then
  bash "$root/data/fetch_gpt2_vocab.sh" "$vocab" || fail "no GPT-2 vocabulary in $vocab"
fi

# One hash of every input: the rule, the sample, the files (name and content), the vocabulary.
inputs_key() {
  {
    printf '%s\nsample %s\n' "$rule" "${sample:-all}"
    (cd "$fortunes_dir" && sha256sum -- "${taken[@]}")
    (cd "$vocab" && sha256sum encoder.json vocab.bpe)
  } | sha256sum | cut -d' ' -f1
}
key="$(inputs_key)"
record="$out/FORTUNES_SOURCE.txt"
if [ -f "$out/fortunes_train.bin" ] && [ -f "$out/fortunes_val.bin" ] && [ -f "$record" ] &&
  [ "$(sed -n 's/^inputs //p' "$record")" = "$key" ]; then
  ringtrain_say "the fortunes corpus in $out is prepared and up to date; nothing to do"
  exit 0
fi

created_out=""
[ -d "$out" ] || created_out="$out"
mkdir -p "$out"
stage="$(mktemp -d "$out/.prepare_fortunes.XXXXXX")"
# A failed run leaves no staging folder, and no DIR if it made it.
trap 'rm -rf "$stage"; [ -z "$created_out" ] || rmdir "$created_out" 2>/dev/null || true' EXIT

# ---- Cut into fortunes and split ------------------------------------------------------------
# Appends the fortunes of one file to train.txt and val.txt in $stage, <|endoftext|> between
# fortunes of a set; `first` is the number of fortunes before this file, `limit` how many more
# to take (-1: all). Prints how many it took.
# shellcheck disable=SC2016  # awk's own $0, not the shell's
split_awk='
function flush() {
  if (text ~ /[^ \t\r\n]/ && (limit < 0 || n < limit)) {
    if ((first + n) % 10 == 9) {
      printf "%s%s", (valhas ? "<|endoftext|>" : ""), text >> valfile
      valhas = 1
    } else {
      printf "%s%s", (trainhas ? "<|endoftext|>" : ""), text >> trainfile
      trainhas = 1
    }
    n++
  }
  text = ""
}
$0 == "%" { flush(); next }
{ text = text $0 "\n" }
END { flush(); print n + 0 }
'
: >"$stage/train.txt"
: >"$stage/val.txt"
total=0
read_files=0
for name in "${taken[@]}"; do
  limit=-1
  [ -z "$sample" ] || limit=$((sample - total))
  [ "$limit" -ne 0 ] || break
  count="$(awk -v first="$total" -v limit="$limit" -v trainfile="$stage/train.txt" \
    -v valfile="$stage/val.txt" -v trainhas="$([ -s "$stage/train.txt" ] && echo 1 || echo 0)" \
    -v valhas="$([ -s "$stage/val.txt" ] && echo 1 || echo 0)" "$split_awk" "$fortunes_dir/$name")"
  total=$((total + count))
  read_files=$((read_files + 1))
  ringtrain_say "[$read_files of ${#taken[@]} files] $name: $count fortunes ($total so far)"
done
[ -s "$stage/val.txt" ] || fail "only $total fortunes: fewer than 10 leave the validation set empty"
val_count=$((total / 10))
train_count=$((total - val_count))

# ---- Tokenise, check, publish ---------------------------------------------------------------
# encode SPLIT K: tokenises SPLIT's text, the K-th of 2; prints what gpt2_tokenize info says.
encode() {
  ringtrain_say "[$2 of 2 splits] tokenising the $1 text"
  "$tool" encode --special --vocab "$vocab" --out "$stage/fortunes_$1.bin" "$stage/$1.txt" >/dev/null ||
    fail "gpt2_tokenize could not encode the $1 text"
  "$tool" info --vocab "$vocab" "$stage/fortunes_$1.bin" | sed 's/^[^:]*: //' ||
    fail "gpt2_tokenize info refused fortunes_$1.bin"
}
train_info="$(encode train 1)"
val_info="$(encode val 2)"
ringtrain_say "train: $train_count fortunes, $train_info"
ringtrain_say "validation: $val_count fortunes, $val_info"

rm -f "$record"  # outputs half replaced are never taken as up to date
mv -f "$stage/fortunes_train.bin" "$out/fortunes_train.bin"
mv -f "$stage/fortunes_val.bin" "$out/fortunes_val.bin"
{
  printf 'inputs %s\n' "$key"
  printf 'Debian fortunes from %s: %d fortunes of %d of %d files (%s)%s\n' "$fortunes_dir" \
    "$total" "$read_files" "${#fortune_files[@]}" "${taken[*]:0:$read_files}" \
    "${sample:+, --sample $sample}"
  printf 'rule: %s\n' "$rule"
  printf 'fortunes_train.bin: %d fortunes, %s\n' "$train_count" "$train_info"
  printf 'fortunes_val.bin: %d fortunes, %s\n' "$val_count" "$val_info"
  printf 'tokenizer: GPT-2 (%s)\n' "$vocab"
} >"$stage/FORTUNES_SOURCE.txt"
mv -f "$stage/FORTUNES_SOURCE.txt" "$record"
ringtrain_say "the fortunes corpus is in $out: fortunes_train.bin and fortunes_val.bin"
