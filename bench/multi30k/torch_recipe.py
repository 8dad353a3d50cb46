#!/usr/bin/env python3
"""attn translate's Multi30k recipe in PyTorch 1.13 (issue 42's baseline: the same recipe, the same
hour, the same machine).

    env -u OPENBLAS_CORETYPE LD_LIBRARY_PATH=OPENBLAS_DIR /usr/bin/python3 \\
        bench/multi30k/torch_recipe.py DATA_DIR --budget-min 60 --threads 1 --rope-base 10000 \\
        --keep-epochs 5 --length-penalty 0.6 --split test_2016_flickr [--bf16]

Debian's PyTorch calls whichever libblas.so.3 the system's alternatives name for its float32
products; the reference BLAS (libblas3) runs them at 6 GFLOP/s on one core of a Zen 5, so the
script stops unless the BLAS is OpenBLAS: libopenblas0-pthread installed, or unpacked where
LD_LIBRARY_PATH names it (OPENBLAS_DIR: apt-get download libopenblas0-pthread, dpkg -x the .deb
into D, D/usr/lib/x86_64-linux-gnu/openblas-pthread). It runs at 71 GFLOP/s there with
OPENBLAS_CORETYPE=Haswell, 119 with its own choice; its thread count is set to --threads (it
keeps its own otherwise). --bf16 products go through oneDNN (AVX512_BF16 where the CPU has it).

What is the same as attn translate train (cli/translate_*.c, src/models/seq2seq_transformer.c):
- tokens: re.findall(r"\\w+|[^\\w\\s]", line.strip().lower()) (ATTN_TOKENIZER_WORDS); a
  vocabulary per language from train, tokens seen at least twice, <unk> <pad> <bos> <eos> first;
  source + <eos>, <bos> + target -> target + <eos>, each cut at 65 ids with its special;
- the model: post-LN encoder-decoder, d 256, 8 heads, FFN 512, 3 + 3 layers, ReLU, dropout on
  the attention weights, the FFN's hidden layer and each residual branch; emb * sqrt(d), then
  the sinusoidal table (interleaved sin/cos) or, with --rope-base, no table and rotary positions
  (GPT-NeoX halves) on q and k of every self-attention; output Linear with bias, untied;
- the loss: cross-entropy with label smoothing 0.1 over the target tokens that are not <pad>;
- Adam(0.9, 0.98, 1e-9), lr = d^-0.5 min(s^-0.5, s 800^-1.5), batches of 64 pairs,
  length-bucketed (pools of 100 batches sorted by source then target length);
- the budget: wall clock from the first step, the run stops at the first step past it; the
  parameters of each whole epoch's end are kept (the last --keep-epochs) and their mean scored;
- decoding: beam 4, score log p / ((5 + length) / 6)^A, a sentence's search ends when 4
  hypotheses ended, at most source length (with <eos>) + 10 tokens;
- BLEU: corpus BLEU-4 with sacrebleu's 13a tokenisation on detokenised output against the raw
  references, cased and lowercased, and on lowercased tokens (the anchor's detokeniser).
What is not: PyTorch's own initialisation, its kernels, padded batches (attn packs them: the
same sums), and float32 products unless --bf16 (torch.autocast on the CPU, bf16 operands)."""
import argparse, copy, ctypes, gzip, json, math, os, random, sys, time
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data"))
# the references attn's tokenizers and BLEU are tested against
from make_bleu_cases import corpus_bleu
from make_tokenizer_cases import detokenize, tok13a, words as tokenize

UNK, PAD, BOS, EOS = 0, 1, 2, 3


def read_lines(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f]


def build_vocab(tok_lists, min_freq=2):
    c = Counter(t for ts in tok_lists for t in ts)
    itos = ["<unk>", "<pad>", "<bos>", "<eos>"] + sorted((w for w, n in c.items() if n >= min_freq),
                                                         key=lambda w: (-c[w], w))
    return itos, {w: i for i, w in enumerate(itos)}


def openblas(threads):
    """The OpenBLAS library this process maps after a float32 product, set to `threads` threads;
    None where the BLAS is another."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "openblas" in l.split()[-1]})
    for lib in libs:
        handle = ctypes.CDLL(lib)
        if hasattr(handle, "openblas_set_num_threads"):
            handle.openblas_set_num_threads(threads)
            return lib
    return None


# ---------------------------------------------------------------- the model
def rotate(x, cos, sin):  # x (B, H, L, hd): GPT-NeoX halves
    h = x.size(-1) // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin


class Attention(nn.Module):
    def __init__(self, d, heads, dropout, rope_base):
        super().__init__()
        self.h, self.hd, self.p, self.rope_base = heads, d // heads, dropout, rope_base
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x, mem, mask, rope):  # mask: additive (B or 1, 1, Lq, Lk)
        B, Lq, _ = x.shape
        split = lambda t: t.view(B, -1, self.h, self.hd).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(mem)), split(self.v(mem))
        if rope and self.rope_base:
            pos = torch.arange(Lq, dtype=torch.float32)
            inv = self.rope_base ** (-torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd)
            ang = torch.outer(pos, inv)
            cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hd) + mask, -1)
        y = F.dropout(w, self.p, self.training) @ v
        return self.o(y.transpose(1, 2).reshape(B, Lq, -1))


class Layer(nn.Module):
    def __init__(self, d, heads, ffn, dropout, rope_base, cross):
        super().__init__()
        self.self_attn = Attention(d, heads, dropout, rope_base)
        self.cross = Attention(d, heads, dropout, 0) if cross else None
        self.l1, self.l2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3 if cross else 2))
        self.p = dropout

    def forward(self, x, self_mask, mem=None, cross_mask=None):
        drop = lambda t: F.dropout(t, self.p, self.training)
        x = self.norms[0](x + drop(self.self_attn(x, x, self_mask, True)))
        if self.cross is not None:
            x = self.norms[1](x + drop(self.cross(x, mem, cross_mask, False)))
        return self.norms[-1](x + drop(self.l2(drop(F.relu(self.l1(x))))))


class Seq2Seq(nn.Module):
    def __init__(self, vs, vt, d, heads, ffn, layers, dropout, rope_base):
        super().__init__()
        self.d, self.p, self.rope_base = d, dropout, rope_base
        self.src_emb, self.tgt_emb = nn.Embedding(vs, d, padding_idx=PAD), nn.Embedding(vt, d, padding_idx=PAD)
        self.enc = nn.ModuleList(Layer(d, heads, ffn, dropout, rope_base, False) for _ in range(layers))
        self.dec = nn.ModuleList(Layer(d, heads, ffn, dropout, rope_base, True) for _ in range(layers))
        self.out = nn.Linear(d, vt)
        pos = torch.arange(256, dtype=torch.float32).unsqueeze(1)
        ang = pos / torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float32) / d)
        pe = torch.zeros(256, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(ang), torch.cos(ang)
        self.register_buffer("pe", pe)

    def embed(self, emb, ids):
        x = emb(ids) * math.sqrt(self.d)
        if not self.rope_base:
            x = x + self.pe[: ids.size(1)]
        return F.dropout(x, self.p, self.training)

    def encode(self, src):
        key_pad = torch.zeros(src.shape, dtype=torch.float32).masked_fill(src.eq(PAD), float("-inf"))[:, None, None]
        x = self.embed(self.src_emb, src)
        for layer in self.enc:
            x = layer(x, key_pad)
        return x, key_pad

    def decode(self, tgt_in, mem, key_pad):
        T = tgt_in.size(1)
        causal = torch.triu(torch.full((T, T), float("-inf")), 1)
        y = self.embed(self.tgt_emb, tgt_in)
        for layer in self.dec:
            y = layer(y, causal, mem, key_pad)
        return self.out(y)


# ---------------------------------------------------------------- batches, decoding
def pad(seqs):
    t = torch.full((len(seqs), max(len(s) for s in seqs)), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        t[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return t


def bucket_batches(n, bs, rng, lens):
    idx = list(range(n))
    rng.shuffle(idx)
    batches = []
    for p in range(0, n, bs * 100):
        pool = sorted(idx[p:p + bs * 100], key=lambda i: lens[i])
        batches += [pool[i:i + bs] for i in range(0, len(pool), bs)]
    rng.shuffle(batches)
    return batches


@torch.no_grad()
def beam_search(model, srcs, k, alpha, bs=100):
    model.eval()
    outs = []
    for b0 in range(0, len(srcs), bs):
        group = [s + [EOS] for s in srcs[b0:b0 + bs]]
        mem, key_pad = model.encode(pad(group))
        limits = [len(s) + 10 for s in group]
        live = [[([BOS], 0.0)] for _ in group]  # per sentence: (tokens, log p)
        best = [None] * len(group)  # (score, tokens)
        ended = [0] * len(group)
        for t in range(1, max(limits) + 1):
            rows = [(i, h) for i, hs in enumerate(live) for h in hs]
            if not rows:
                break
            idx = torch.tensor([i for i, _ in rows])
            logits = model.decode(pad([h[0] for _, h in rows]), mem[idx], key_pad[idx])
            lengths = torch.tensor([len(h[0]) - 1 for _, h in rows])
            logp = torch.log_softmax(logits[torch.arange(len(rows)), lengths].float(), -1)
            top_lp, top_id = logp.topk(k, -1)
            cands = [[] for _ in group]
            for r, (i, (toks, lp)) in enumerate(rows):
                for j in range(k):
                    cands[i].append((lp + top_lp[r, j].item(), toks + [top_id[r, j].item()]))
            for i, cs in enumerate(cands):
                if not cs:
                    continue
                live[i] = []
                for lp, toks in sorted(cs, key=lambda c: -c[0])[:k]:
                    if toks[-1] == EOS or t == limits[i]:
                        ended[i] += 1
                        score = lp / ((5 + len(toks) - 1) / 6) ** alpha
                        if best[i] is None or score > best[i][0]:
                            best[i] = (score, toks)
                    else:
                        live[i].append((toks, lp))
                if ended[i] >= k:
                    live[i] = []
        outs += [[x for x in b[1][1:] if x != EOS] for b in best]
    return outs


def score(model, split_src, raw_refs, tok_refs, itos, k, alpha):
    hyp_ids = beam_search(model, split_src, k, alpha)
    hyp_tok = [[itos[i] for i in h] for h in hyp_ids]
    hyp = [detokenize(h) for h in hyp_tok]
    return dict(cased=corpus_bleu([tok13a(h) for h in hyp], [tok13a(r) for r in raw_refs])[0],
                lower=corpus_bleu([tok13a(h.lower()) for h in hyp], [tok13a(r.lower()) for r in raw_refs])[0],
                tokens=corpus_bleu(hyp_tok, tok_refs)[0]), hyp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--budget-min", type=float, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rope-base", type=float, default=0)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--keep-epochs", type=int, default=5)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--length-penalty", type=float, default=0.6)
    ap.add_argument("--split", default="val")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast(cpu, bfloat16) in training")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps (a smoke test)")
    ap.add_argument("--out", default="torch_recipe_out")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    blas = openblas(a.threads)
    if blas is None:
        sys.exit("torch_recipe: PyTorch's float32 products run on the reference BLAS here; "
                 "apt-get install libopenblas0-pthread (or LD_LIBRARY_PATH to it, above)")
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    rd = lambda split, lang: read_lines(os.path.join(a.data, f"{split}.{lang}.gz"))
    raw = {s: (rd(s, "en"), rd(s, "fr")) for s in ("train", "val", a.split)}
    tok = {s: ([tokenize(x) for x in v[0]], [tokenize(y) for y in v[1]]) for s, v in raw.items()}
    sitos, sstoi = build_vocab(tok["train"][0])
    titos, tstoi = build_vocab(tok["train"][1])
    enc = lambda ts, stoi: [stoi.get(t, UNK) for t in ts]
    train = [(enc(x, sstoi)[:65], enc(y, tstoi)[:65]) for x, y in zip(*tok["train"])]
    val = [(enc(x, sstoi), enc(y, tstoi)) for x, y in zip(*tok["val"])]
    model = Seq2Seq(len(sitos), len(titos), 256, 8, 512, 3, a.dropout, a.rope_base)
    print(f"torch {torch.__version__}, {a.threads} threads, BLAS {blas}; {len(train)} train pairs, "
          f"vocabularies {len(sitos)} / {len(titos)}, {sum(p.numel() for p in model.parameters())} parameters", flush=True)
    crit = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 256 ** -0.5 * min((s + 1) ** -0.5, (s + 1) * 800 ** -1.5))
    lens = [(len(s), len(t)) for s, t in train]
    kept, step, tokens, epoch, stop = [], 0, 0, 0, False
    t0 = time.time()
    while not stop:
        model.train()
        epoch_loss = epoch_w = 0.0
        for batch in bucket_batches(len(train), 64, rng, lens):
            src = pad([train[i][0] + [EOS] for i in batch])
            tin, tout = pad([[BOS] + train[i][1] for i in batch]), pad([train[i][1] + [EOS] for i in batch])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                mem, key_pad = model.encode(src)
                logits = model.decode(tin, mem, key_pad)
            loss = crit(logits.float().reshape(-1, logits.size(-1)), tout.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            n = tout.ne(PAD).sum().item()
            epoch_loss, epoch_w = epoch_loss + loss.item() * n, epoch_w + n
            tokens += n + src.ne(PAD).sum().item()
            if time.time() - t0 > 60 * a.budget_min or step == a.max_steps:
                stop = True
                break
        else:
            epoch += 1
            kept = (kept + [copy.deepcopy(model.state_dict())])[-a.keep_epochs:]
        print(json.dumps(dict(epoch=epoch, whole=not stop, step=step, train_loss=epoch_loss / max(epoch_w, 1),
                              tokens_per_s=tokens / (time.time() - t0), minutes=(time.time() - t0) / 60)), flush=True)
    train_min = (time.time() - t0) / 60
    if kept:  # the mean of the kept epochs' ends, as attn translate train --average-kept
        model.load_state_dict({k: sum(sd[k].float() for sd in kept) / len(kept) for k in kept[0]})
    td = time.time()
    test_src = [enc(x, sstoi) for x in tok[a.split][0]]
    bleu, hyp = score(model, test_src, raw[a.split][1], tok[a.split][1], titos, a.beam, a.length_penalty)
    res = dict(args=vars(a), torch=torch.__version__, blas=blas, steps=step, epochs=epoch, train_minutes=train_min,
               tokens_per_s=tokens / (60 * train_min), averaged=len(kept), decode_s=time.time() - td, bleu=bleu)
    with open(os.path.join(a.out, f"{a.split}.hyp.fr"), "w", encoding="utf-8") as f:
        f.write("\n".join(hyp) + "\n")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
