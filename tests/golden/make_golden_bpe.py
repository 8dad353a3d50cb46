#!/usr/bin/python3
"""Writes tests/golden/bpe.safetensors, which tests/test_data_bpe.c holds attn_bpe_* to:

  * pieces: GPT-2's pre-splitting pattern run by the regex module (Debian's python3-regex), the
    pattern of openai/gpt-2's encoder.py, over hand-written edge cases (contractions, runs of
    spaces before words, tabs and newlines, digits, punctuation, scripts other than Latin, spaces
    of other kinds, a space at the end) and the first reviews of the shipped mini IMDB set:
    split_text (U8, the UTF-8 bytes) and split_ends (I64, each piece's end offset);
  * training: a byte-level BPE learnt by the naive algorithm written here (every merge recounts
    every adjacent pair over the distinct pieces; the most frequent pair wins, ties to the smaller
    pair of ids; pairs seen once are never merged) from the first TRAIN_BYTES of the shipped
    training reviews: train_text (U8), merges (I64, (n, 2)), vocab_size requested;
  * encoding: GPT-2's bpe() (merge the adjacent pair of lowest rank, all its occurrences left to
    right, until none has a rank) with those merges on held-out test reviews: encode_text (U8),
    encode_ids (I64).

    /usr/bin/python3 tests/golden/make_golden_bpe.py
"""
import glob
import os
import sys

import numpy as np
import regex
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_writer import write_safetensors  # noqa: E402

GPT2_PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
TRAIN_BYTES = 150_000
VOCAB_SIZE = 700
EDGE_CASES = [
    "Hello world", "don't you're we've I'm they'll he'd it's", "'s'S 'll'LL ''' 're",
    "a  b   c    d", "tab\tthen\t\tnewline\n\nend  ", "  leading", "trailing   ", " ", "   ", "\n", "x\n\n y",
    "1234 5678 3.14 1,000,000 ½ ² ٣", "!!! ?? ... --- (a) [b] {c} <br /><br />", "a!b?c.d",
    "naïve café Straße ÉCOLE", "日本語のテキスト 中文", "Ελληνικά кириллица עברית العربية",
    "space\u00a0nbsp\u2003em\u3000ideographic", "emoji 😀😀 🎉!", "mixed123abc 12ab ab12",
    "\u0085next\u2028line", "end with space ", "x\u200by",
]


def pieces(text):
    return [m.group(0) for m in GPT2_PATTERN.finditer(text)]


def review_files(split):
    return sorted(glob.glob(os.path.join("data", "aclImdb_mini", split, "*", "*.txt")))


def read_reviews(split, limit):
    out, n = [], 0
    for path in review_files(split):
        with open(path, encoding="utf-8") as f:
            t = f.read()
        out.append(t)
        n += len(t.encode("utf-8"))
        if n >= limit:
            break
    return "\n".join(out)


def train(text, vocab_size):
    counts = {}
    for p in pieces(text):
        b = p.encode("utf-8")
        if len(b) > 1:
            counts[b] = counts.get(b, 0) + 1
    words = [[list(w), c] for w, c in counts.items()]
    merges = []
    while len(merges) < vocab_size - 257:
        pairs = {}
        for syms, c in words:
            for a, b in zip(syms, syms[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]), default=None)
        if best is None or best[1] < 2:
            break
        (a, b), made = best[0], 256 + len(merges)
        merges.append((a, b))
        for w in words:
            syms, out, i = w[0], [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(made)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            w[0] = out
    return merges


def encode(text, merges):
    rank = {m: i for i, m in enumerate(merges)}
    ids = []
    for p in pieces(text):
        syms = list(p.encode("utf-8"))
        while len(syms) > 1:
            r = min((rank.get(pair, len(merges)), k) for k, pair in enumerate(zip(syms, syms[1:])))
            if r[0] == len(merges):
                break
            a, b = merges[r[0]]
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(256 + r[0])
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        ids.extend(syms)
    return ids


def u8(text):
    return torch.from_numpy(np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy())


def main():
    split_text = "\x00".join(EDGE_CASES)  # NUL is a character of no class: it splits the cases apart
    split_text = split_text + "\x00" + read_reviews("train", 20_000)
    ends, at = [], 0
    for p in pieces(split_text):
        at += len(p.encode("utf-8"))
        ends.append(at)
    train_text = read_reviews("train", TRAIN_BYTES)
    merges = train(train_text, VOCAB_SIZE)
    encode_text = read_reviews("test", 30_000)
    ids = encode(encode_text, merges)
    write_safetensors(os.path.join("tests", "golden", "bpe.safetensors"),
                      {"split_text": u8(split_text), "split_ends": torch.tensor(ends, dtype=torch.int64),
                       "train_text": u8(train_text), "merges": torch.tensor(merges, dtype=torch.int64),
                       "encode_text": u8(encode_text), "encode_ids": torch.tensor(ids, dtype=torch.int64)},
                      {"vocab_size": VOCAB_SIZE})
    print(f"bpe: {len(ends)} pieces, {len(merges)} merges from {len(train_text.encode())} bytes, "
          f"{len(ids)} ids for {len(encode_text.encode())} bytes")


if __name__ == "__main__":
    main()
