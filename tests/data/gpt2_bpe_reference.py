#!/usr/bin/env python3
"""An independent, small re-implementation of GPT-2's byte-level BPE encoder (the algorithm of
OpenAI's encoder.py), run by hand -- never by the tests -- to compute the token ids that
bpe_tokenizer_test.cc hard-codes. Needs the `regex` module (Debian: python3-regex) for \\p{L}.

    tests/data/gpt2_bpe_reference.py data/gpt2 "Hello world" " Hello" ...

Prints one line per text: the text (repr) and its ids.
"""
import json
import sys

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_alphabet():
    printable = [b for b in range(256)
                 if ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or b >= 0xAE]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def load(folder):
    with open(f"{folder}/encoder.json", encoding="utf-8") as f:
        encoder = json.load(f)
    with open(f"{folder}/vocab.bpe", encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("#version")
    ranks = {}
    for rank, line in enumerate(l for l in lines[1:] if l):
        left, right = line.split(" ")
        ranks[(left, right)] = rank
    return encoder, ranks


def bpe(symbols, ranks):
    while len(symbols) > 1:
        pairs = [(ranks.get((a, b), None), (a, b)) for a, b in zip(symbols, symbols[1:])]
        ranked = [p for p in pairs if p[0] is not None]
        if not ranked:
            break
        _, (a, b) = min(ranked)
        merged, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                merged.append(a + b)
                i += 2
            else:
                merged.append(symbols[i])
                i += 1
        symbols = merged
    return symbols


def encode(text, encoder, ranks, alphabet):
    ids = []
    for word in PATTERN.findall(text):
        symbols = [alphabet[b] for b in word.encode("utf-8")]
        ids.extend(encoder[s] for s in bpe(symbols, ranks))
    return ids


def main():
    encoder, ranks = load(sys.argv[1])
    alphabet = byte_alphabet()
    for text in sys.argv[2:]:
        text = text.encode().decode("unicode_escape").encode("latin-1").decode("utf-8")
        print(repr(text), encode(text, encoder, ranks, alphabet))


if __name__ == "__main__":
    main()
