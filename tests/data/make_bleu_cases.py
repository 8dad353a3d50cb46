#!/usr/bin/python3
"""Prints the expected numbers of tests/test_data_bleu.c (pasted there by hand):

    /usr/bin/python3 tests/data/make_bleu_cases.py

corpus_bleu and tok13a are sacrebleu's corpus BLEU-4 (no smoothing, one reference) and 13a
tokenizer as re-implemented in shared/bench/multi30k_transformer_torch.py (sacrebleu is not
installed), with two of sacrebleu's rules that copy leaves out: each line is rstrip()ped before
13a (sacrebleu's _preprocess_segment), and BP is 1 unless hyp < ref (both empty included);
d2l_bleu is d2l 1.0's bleu(). The cases are the test's: a toy corpus, edge cases,
Multi30k test_2016_flickr (fr) with a hypothesis made from each reference by dropping every
fifth word token and detokenising, and D2L's toy translations.
"""
import collections
import gzip
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_cases import detokenize, tok13a, words  # noqa: E402


def seg13a(line):
    """sacrebleu's _preprocess_segment (no lowercasing): 13a on the line without trailing space"""
    return tok13a(line.rstrip())


def ngrams(toks, n):
    return collections.Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))


def corpus_bleu(hyps, refs, max_n=4):
    match = [0] * max_n
    total = [0] * max_n
    hl = rl = 0
    for h, r in zip(hyps, refs):
        hl += len(h)
        rl += len(r)
        for n in range(1, max_n + 1):
            hc, rc = ngrams(h, n), ngrams(r, n)
            total[n - 1] += max(len(h) - n + 1, 0)
            match[n - 1] += sum(min(c, rc[g]) for g, c in hc.items())
    prec = [m / t if t else 0.0 for m, t in zip(match, total)]
    bp = 1.0 if hl >= rl else (math.exp(1 - rl / hl) if hl else 0.0)
    bleu = 0.0 if min(match) == 0 else bp * math.exp(sum(math.log(p) for p in prec) / max_n)
    return 100 * bleu, [100 * p for p in prec], bp, hl, rl


def d2l_bleu(pred_seq, label_seq, k):
    pred_tokens, label_tokens = pred_seq.split(' '), label_seq.split(' ')
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        num_matches, label_subs = 0, collections.defaultdict(int)
        for i in range(len_label - n + 1):
            label_subs[' '.join(label_tokens[i: i + n])] += 1
        for i in range(len_pred - n + 1):
            if label_subs[' '.join(pred_tokens[i: i + n])] > 0:
                num_matches += 1
                label_subs[' '.join(pred_tokens[i: i + n])] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


TOY_HYP = ["the CAT is on the mat.", "There is a cat on the mat.", "A dog, 3.5 kg, ran-away!",
           "Un homme avec une casquette orange faisant quelque chose.", "",
           "L'homme &amp; le chien : 1,000 m\u00e8tres-2."]
TOY_REF = ["The cat sat on the mat.", "The cat is on the mat.", "A dog (3.5 kg) ran away!",
           "Un homme avec un chapeau orange regardant quelque chose.", "Nothing here.",
           "L'homme et le chien : 1,000 m\u00e8tres - 2."]

D2L = [("va !", "va !", 2), ("j'ai perdu .", "j'ai perdu .", 2), ("il est riche .", "il est calme .", 2),
       ("je suis chez moi .", "je suis chez moi .", 2), ("le le le le", "le chat est sur le tapis", 2),
       ("le chat", "le chat est sur le tapis", 4), ("a b c d e", "a b c d e", 4),
       ("x", "a b", 2), ("a b a b", "a b a", 2), ("a b a b", "a b", 3)]


def show(name, r):
    bleu, prec, bp, hl, rl = r
    print(f"{name}: bleu {bleu!r} prec {[repr(p) for p in prec]} bp {bp!r} hyp {hl} ref {rl}")


def main():
    show("trailing whitespace", corpus_bleu([seg13a("the cat sat on the mat -\n"), seg13a("a b c d\u00a0\t \r\n")],
                                            [seg13a("the cat sat on the mat -"), seg13a("a b c d\u2028")]))
    show("nothing added", corpus_bleu([], []))
    show("toy 13a", corpus_bleu([seg13a(h) for h in TOY_HYP], [seg13a(r) for r in TOY_REF]))
    show("toy 13a lc", corpus_bleu([seg13a(h.lower()) for h in TOY_HYP],
                                   [seg13a(r.lower()) for r in TOY_REF]))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "multi30k")
    with gzip.open(os.path.join(root, "test_2016_flickr.fr.gz"), "rt", encoding="utf-8") as f:
        refs = [l.rstrip("\n") for l in f]
    ref_tok = [words(r) for r in refs]
    hyp_tok = [[t for i, t in enumerate(toks) if i % 5 != 4] for toks in ref_tok]
    hyp = [detokenize(t) for t in hyp_tok]
    show("m30k 13a", corpus_bleu([seg13a(h) for h in hyp], [seg13a(r) for r in refs]))
    show("m30k 13a lc", corpus_bleu([seg13a(h.lower()) for h in hyp], [seg13a(r.lower()) for r in refs]))
    show("m30k tokens", corpus_bleu(hyp_tok, ref_tok))
    show("m30k self", corpus_bleu([seg13a(r) for r in refs], [seg13a(r) for r in refs]))
    for p, l, k in D2L:
        print(f"d2l {p!r} {l!r} k={k}: {d2l_bleu(p, l, k)!r}")


if __name__ == "__main__":
    main()
