# shellcheck shell=bash
# write_tiny_vocab DIR: a byte-level BPE vocabulary in GPT-2's file formats, small enough to write
# here: encoder.json with the 256 byte tokens spelled as GPT-2 spells them (JSON \u escapes),
# three merges (t h, th e, e r) and <|endoftext|> = 259; vocab.bpe with those merges.
write_tiny_vocab() {
  local dir="$1" b code next=256 json="{"
  mkdir -p "$dir"
  for b in $(seq 0 255); do
    if { [ "$b" -ge 33 ] && [ "$b" -le 126 ]; } || { [ "$b" -ge 161 ] && [ "$b" -le 172 ]; } ||
      [ "$b" -ge 174 ]; then
      code="$b"
    else
      code="$next"
      next=$((next + 1))
    fi
    json+="$(printf '"\\u%04x": %d, ' "$code" "$b")"
  done
  printf '%s"th": 256, "the": 257, "er": 258, "<|endoftext|>": 259}\n' "$json" >"$dir/encoder.json"
  printf '#version: 0.2\nt h\nth e\ne r\n' >"$dir/vocab.bpe"
}
