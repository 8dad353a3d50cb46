#!/usr/bin/python3
"""The language model of attn lm (GPT-2 style, as nanoGPT's model.py composes it) in PyTorch 1.13,
the peer of bench/bench_lm.c and of `attn lm train`:

  step:   one training step (forward, cross-entropy, backward, clip_grad_norm_ 1.0, AdamW betas
          (0.9, 0.95)) on random tokens, batch B sequences of the whole context; median ms over
          --steps after 2 warm-ups; decoding with a key/value cache at batch 1 (a prompt of one
          token, then one per step to the context), tokens/s. One JSON line.
  train:  trains on the token files `attn lm train --export-tokens DIR` writes (llm.c's format:
          a 256-int32 header, magic 20240520, then uint16 ids) for --minutes, with attn lm's rules
          (AdamW, warm-up then cosine to a tenth of --lr over --epochs, clipping 1.0, batches of
          random chunks); validation loss and bits per byte on the first --val-tokens of val.bin
          at the end, and a sample. One JSON line per validation.

Attention is written out (torch 1.13 has no scaled_dot_product_attention): softmax(q k^T / sqrt
d + causal) v, all heads at once.

    /usr/bin/python3 bench/torch/lm.py step [--layers 6 --d-model 384 --heads 6 --context 256
        --batch 8 --vocab 4096 --steps 10 --threads 2]
    /usr/bin/python3 bench/torch/lm.py train --tokens DIR --minutes 30 [sizes as above, --lr 1e-3]
"""
import argparse
import json
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, E, H, layers):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(E), nn.LayerNorm(E)
        self.c_attn, self.c_proj = nn.Linear(E, 3 * E), nn.Linear(E, E)
        self.c_fc, self.mlp_proj = nn.Linear(E, 4 * E), nn.Linear(4 * E, E)
        for lin in (self.c_attn, self.c_fc):
            nn.init.normal_(lin.weight, 0.0, 0.02), nn.init.zeros_(lin.bias)
        for lin in (self.c_proj, self.mlp_proj):
            nn.init.normal_(lin.weight, 0.0, 0.02 / math.sqrt(2 * layers)), nn.init.zeros_(lin.bias)

    def attend(self, x, cache=None):
        B, T, E = x.shape
        q, k, v = self.c_attn(x).split(E, dim=2)
        q, k, v = (t.view(B, T, self.H, E // self.H).transpose(1, 2) for t in (q, k, v))
        if cache is not None:  # decoding: this layer's keys and values so far
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        s = q @ k.transpose(-2, -1) / math.sqrt(E // self.H)
        L = k.shape[2]
        mask = torch.ones(T, L, dtype=torch.bool).triu(L - T + 1)
        y = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, T, E))

    def forward(self, x, cache=None):
        x = x + self.attend(self.ln_1(x), cache)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, C, E, H, layers):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, E), nn.Embedding(C, E)
        nn.init.normal_(self.wte.weight, 0.0, 0.02), nn.init.normal_(self.wpe.weight, 0.0, 0.02)
        self.h = nn.ModuleList(Block(E, H, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(E)

    def forward(self, ids, caches=None, start=0):
        x = self.wte(ids) + self.wpe(torch.arange(start, start + ids.shape[1]))
        for i, blk in enumerate(self.h):
            x = blk(x, caches[i] if caches is not None else None)
        return self.ln_f(x) @ self.wte.weight.T


def optimizer(model, lr, wd):
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=wd)


def step(model, opt, ids, targets):
    opt.zero_grad(set_to_none=True)
    logits = model(ids)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


@torch.no_grad()
def decode_tokens_per_s(model, C):
    model.eval()
    caches = [[] for _ in model.h]
    tok = torch.zeros(1, 1, dtype=torch.long)
    t0 = time.perf_counter()
    for t in range(C):
        tok = model(tok, caches, t)[:, -1].argmax(-1, keepdim=True)
    model.train()
    return C / (time.perf_counter() - t0)


def cmd_step(a):
    torch.manual_seed(1)
    model = GPT(a.vocab, a.context, a.d_model, a.heads, a.layers)
    opt = optimizer(model, 1e-4, 0.01)
    ids = torch.randint(0, a.vocab, (a.batch, a.context + 1))
    times, first = [], None
    for s in range(a.steps + 2):
        t0 = time.perf_counter()
        loss = step(model, opt, ids[:, :-1], ids[:, 1:])
        times.append(1e3 * (time.perf_counter() - t0))
        first = loss if first is None else first
    med = sorted(times[2:])[a.steps // 2]
    dec = sorted(decode_tokens_per_s(model, a.context) for _ in range(3))[1]
    print(json.dumps({"bench": "lm", "impl": "torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "context": a.context,
                      "batch": a.batch, "vocab": a.vocab, "params": sum(p.numel() for p in model.parameters()),
                      "first_loss": round(first, 4), "step_ms_med": round(med, 2), "step_ms_min": round(min(times[2:]), 2),
                      "train_tokens_s": round(a.batch * a.context / med * 1e3), "decode_tokens_s": round(dec, 1)}))


def read_tokens(path):
    with open(path, "rb") as f:
        head = struct.unpack("<256i", f.read(1024))
        assert head[0] == 20240520 and head[1] == 1, f"{path}: not an llm.c token file"
        ids = np.frombuffer(f.read(), dtype=np.uint16)
    assert len(ids) == head[2], f"{path}: {len(ids)} ids, the header says {head[2]}"
    return torch.from_numpy(ids.astype(np.int64))


@torch.no_grad()
def validate(model, val, C, limit, token_bytes, eot):
    model.eval()
    n = min(len(val), limit if limit else len(val))  # as attn lm's --val-tokens
    chunks = (n - 1) // C
    nats, count, nbytes = 0.0, 0, 0
    for c0 in range(0, chunks, 8):
        rows = torch.stack([val[c * C:c * C + C + 1] for c in range(c0, min(chunks, c0 + 8))])
        logits = model(rows[:, :-1])
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1), reduction="sum").item()
        count += rows[:, 1:].numel()
        tgt = rows[:, 1:].reshape(-1)
        nbytes += int(token_bytes[tgt].sum().item())
    model.train()
    return nats / count, nats / math.log(2) / nbytes, count


def cmd_train(a):
    torch.manual_seed(a.seed)
    train, val = read_tokens(os.path.join(a.tokens, "train.bin")), read_tokens(os.path.join(a.tokens, "val.bin"))
    with open(os.path.join(a.tokens, "token_bytes.bin"), "rb") as f:  # each id's byte count (eot: 0)
        token_bytes = torch.from_numpy(np.frombuffer(f.read(), dtype=np.int32).astype(np.int64))
    V, C, eot = len(token_bytes), a.context, len(token_bytes) - 1
    model = GPT(V, C, a.d_model, a.heads, a.layers)
    opt = optimizer(model, a.lr, a.weight_decay)
    chunks = (len(train) - 1) // C
    per_epoch = (chunks + a.batch - 1) // a.batch
    total = per_epoch * a.epochs

    def lr_at(s):
        if s <= a.warmup:
            return a.lr * s / a.warmup
        p = min(1.0, (s - a.warmup) / max(1, total - a.warmup))
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))
    g = torch.Generator().manual_seed(a.seed)
    t0, s, seen = time.perf_counter(), 0, 0
    while time.perf_counter() - t0 < 60 * a.minutes and s < total:
        order = torch.randperm(chunks, generator=g)
        for b0 in range(0, chunks, a.batch):
            if time.perf_counter() - t0 >= 60 * a.minutes or s >= total:
                break
            s += 1
            for grp in opt.param_groups:
                grp["lr"] = lr_at(s)
            rows = torch.stack([train[c * C:c * C + C + 1] for c in order[b0:b0 + a.batch].tolist()])
            loss = step(model, opt, rows[:, :-1], rows[:, 1:])
            seen += rows[:, 1:].numel()
            if s % 50 == 0:
                print(json.dumps({"step": s, "loss": round(loss, 4), "minutes": round((time.perf_counter() - t0) / 60, 2)}),
                      flush=True)
    secs = time.perf_counter() - t0
    vloss, bpb, n = validate(model, val, C, a.val_tokens, token_bytes, eot)
    print(json.dumps({"impl": "torch", "steps": s, "tokens": seen, "seconds": round(secs, 1),
                      "tokens_s": round(seen / secs), "val_loss": round(vloss, 4), "val_bpb": round(bpb, 4),
                      "val_tokens": n, "threads": torch.get_num_threads()}), flush=True)
    with open(os.path.join(a.tokens, "vocab_bytes.bin"), "rb") as f:
        table = f.read()
    offsets = np.concatenate([[0], np.cumsum(token_bytes.numpy())])
    for k in range(3):  # unconditional samples: after <|endoftext|>, temperature 0.8, top-p 0.95
        ids = sample(model, eot, C, 80, 0.8, 0.95, torch.Generator().manual_seed(k))
        text = b"".join(table[offsets[i]:offsets[i + 1]] for i in ids).decode("utf-8", "replace")
        print(json.dumps({"sample": k, "text": text}), flush=True)
    if a.save:
        torch.save(model.state_dict(), a.save)


@torch.no_grad()
def sample(model, eot, C, n, temperature, top_p, gen):
    model.eval()
    caches, tok, out = [[] for _ in model.h], torch.tensor([[eot]]), []
    for t in range(min(n, C - 1)):
        p = torch.softmax(model(tok, caches, t)[0, -1] / temperature, -1)
        ps, order = p.sort(descending=True)
        keep = int((ps.cumsum(0) < top_p).sum().item()) + 1
        nxt = order[torch.multinomial(ps[:keep] / ps[:keep].sum(), 1, generator=gen)].item()
        if nxt == eot:
            break
        out.append(nxt)
        tok = torch.tensor([[nxt]])
    model.train()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["step", "train"])
    for name, default in (("layers", 6), ("d-model", 384), ("heads", 6), ("context", 256), ("batch", 8),
                          ("vocab", 4096), ("steps", 10), ("threads", 2), ("epochs", 1), ("warmup", 100),
                          ("val-tokens", 131072), ("seed", 0)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--tokens")
    ap.add_argument("--save")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cmd_step(a) if a.mode == "step" else cmd_train(a)


if __name__ == "__main__":
    main()
