#!/usr/bin/env python3
"""Golden files for `attn tour` (read by tests/test_tour.c): tour_<step>.safetensors, one per
step whose tutorial code is deterministic once its inputs and weights are fixed.

Both sides draw the same numbers. The tour seeds a PCG32 stream (attn_rng, reproduced below) with
0 at the start of every step and draws, in the order of the tutorial module's
named_parameters(), every Linear / Conv1d weight and bias as (2u - 1) / sqrt(fan_in) in float32
(PyTorch's default U(-b, b) init, b = 1/sqrt(fan_in)); LayerNorm keeps 1 and 0. Random inputs
(torch.rand, torch.randn, torch.normal) are attn_rng_uniform / attn_rng_normal (Box-Muller) from
the same stream. Here the tutorials' own PyTorch code (seed 000 and 002 listings as printed;
D2L's functions written from the formulas seed 003 gives) runs on those numbers, and every input,
weight and output is saved under the names `attn tour --save` uses.

Run from the repository root with Debian's torch 1.13:
    /usr/bin/python3 tests/golden/make_golden_tour.py
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from safetensors_writer import write_safetensors

torch.set_num_threads(1)
MASK64 = (1 << 64) - 1
F32 = np.float32


class Pcg32:
    """attn_rng: PCG32 XSH RR with 64-bit state, Box-Muller normals in pairs."""

    def __init__(self, seed):
        self.state, self.inc, self.spare = 0, ((seed << 1) | 1) & MASK64, None
        self.u32()
        self.state = (self.state + (0x853C49E6748FEA9B ^ seed)) & MASK64
        self.u32()

    def u32(self):
        old = self.state
        self.state = (old * 6364136223846793005 + self.inc) & MASK64
        xorshifted = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & 0xFFFFFFFF

    def uniform(self):
        return F32((self.u32() >> 8) * (1.0 / 16777216.0))

    def normal(self):
        if self.spare is not None:
            s, self.spare = self.spare, None
            return s
        u1 = (self.u32() + 1.0) / 4294967297.0
        u2 = self.u32() / 4294967296.0
        r, th = math.sqrt(-2.0 * math.log(u1)), 2.0 * math.pi * u2
        self.spare = F32(r * math.sin(th))
        return F32(r * math.cos(th))

    def weights(self, shape, fan_in):
        """tour_uniform: (2u - 1) / sqrt(fan_in), float32 arithmetic as in C."""
        bound = F32(1.0) / np.sqrt(F32(fan_in))
        vals = [(F32(2.0) * self.uniform() - F32(1.0)) * bound for _ in range(int(np.prod(shape)))]
        return torch.tensor(np.array(vals, dtype=np.float32)).reshape(shape)

    def rand(self, *shape):
        return torch.tensor(np.array([self.uniform() for _ in range(int(np.prod(shape)))],
                                     dtype=np.float32)).reshape(shape)

    def randn(self, *shape):
        return torch.tensor(np.array([self.normal() for _ in range(int(np.prod(shape)))],
                                     dtype=np.float32)).reshape(shape)


@torch.no_grad()
def init_linear(rng, lin):
    lin.weight.copy_(rng.weights(lin.weight.shape, lin.in_features))
    if lin.bias is not None:
        lin.bias.copy_(rng.weights(lin.bias.shape, lin.in_features))


def save(step, tensors):
    stem = step.replace("/", "_").replace(".", "_").replace("-", "_")
    write_safetensors("tests/golden/tour_%s.safetensors" % stem,
                      {k: v.detach().float().contiguous() for k, v in tensors.items()},
                      {"source": "attn tour %s, the tutorial's code in torch 1.13" % step})


# ---- seed 000: its listing as printed ----

class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_k=64):
        super().__init__()
        self.d_k = d_k

    def forward(self, Q, K, V, mask=None):
        scores = torch.matmul(Q, K.transpose(-2, -1))
        scores = scores / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float('-inf'))
        attn_weights = F.softmax(scores, dim=-1)
        output = torch.matmul(attn_weights, V)
        return output, attn_weights


def seed000():
    rng = Pcg32(0)
    Q, K, V = rng.randn(2, 10, 64), rng.randn(2, 10, 64), rng.randn(2, 10, 64)
    attn = ScaledDotProductAttention(64)
    out, w = attn(Q, K, V)
    mout, mw = attn(Q, K, V, torch.tril(torch.ones(10, 10)))
    save("000/demo", {"Q": Q, "K": K, "V": V, "output": out, "attn_weights": w,
                      "masked_output": mout, "masked_attn_weights": mw})


# ---- seed 002: its listings as printed (sections 1.2 to 5.3) ----

x002 = torch.tensor([[
    [1.0, 0.5, 0.8, 2.0, 0.1, 1.5, 0.3, 1.2],
    [0.7, 1.2, 0.4, 1.8, 0.9, 0.6, 1.1, 0.2],
    [1.3, 0.3, 1.7, 0.6, 1.4, 0.8, 0.5, 1.9],
    [0.2, 1.5, 1.1, 0.7, 0.3, 1.8, 1.6, 0.4]]])


class SelfAttention(nn.Module):
    def __init__(self, embed_size):
        super().__init__()
        self.embed_size = embed_size
        self.Wq = nn.Linear(embed_size, embed_size)
        self.Wk = nn.Linear(embed_size, embed_size)
        self.Wv = nn.Linear(embed_size, embed_size)

    def forward(self, x):
        return self.Wq(x), self.Wk(x), self.Wv(x)


def scaled_dot_product_attention(Q, K, V, mask=None):
    matmul_qk = torch.matmul(Q, K.transpose(-2, -1))
    d_k = K.size(-1)
    scaled_attention_logits = matmul_qk / torch.sqrt(torch.tensor(d_k, dtype=torch.float32))
    if mask is not None:  # what section 4.2's create_mask is for; the listing drops it
        scaled_attention_logits = scaled_attention_logits + mask
    attention_weights = torch.softmax(scaled_attention_logits, dim=-1)
    return torch.matmul(attention_weights, V), attention_weights


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_size, num_heads):
        super().__init__()
        self.embed_size, self.num_heads = embed_size, num_heads
        self.head_dim = embed_size // num_heads
        self.Wq = nn.Linear(embed_size, embed_size)
        self.Wk = nn.Linear(embed_size, embed_size)
        self.Wv = nn.Linear(embed_size, embed_size)
        self.fc_out = nn.Linear(embed_size, embed_size)

    def split_heads(self, x):
        batch_size, seq_length, _ = x.size()
        return x.view(batch_size, seq_length, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, Q, K, V, mask=None):
        batch_size = Q.size(0)
        Q, K, V = self.split_heads(self.Wq(Q)), self.split_heads(self.Wk(K)), self.split_heads(self.Wv(V))
        attn_output, attn_weights = scaled_dot_product_attention(Q, K, V, mask)
        attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, -1, self.embed_size)
        return self.fc_out(attn_output), attn_weights


class TransformerBlock(nn.Module):
    def __init__(self, embed_size, num_heads, ff_dim, dropout=0.1):
        super().__init__()
        self.attention = MultiHeadAttention(embed_size, num_heads)
        self.feed_forward = nn.Sequential(nn.Linear(embed_size, ff_dim), nn.ReLU(),
                                          nn.Linear(ff_dim, embed_size))
        self.norm1 = nn.LayerNorm(embed_size)
        self.norm2 = nn.LayerNorm(embed_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        attn_output, _ = self.attention(x, x, x)
        x = self.norm1(x + self.dropout(attn_output))
        ff_output = self.feed_forward(x)
        return self.norm2(x + self.dropout(ff_output))


class ConvAttention(nn.Module):
    def __init__(self, embed_size, num_heads, kernel_size=3):
        super().__init__()
        self.attention = MultiHeadAttention(embed_size, num_heads)
        self.conv = nn.Conv1d(embed_size, embed_size, kernel_size, padding=kernel_size // 2)
        self.norm = nn.LayerNorm(embed_size)

    def forward(self, x):
        attn_out, _ = self.attention(x, x, x)
        conv_out = self.conv(x.transpose(1, 2)).transpose(1, 2)
        return self.norm(attn_out + conv_out)


class EfficientAttention(nn.Module):
    def __init__(self, embed_size):
        super().__init__()
        self.to_query = nn.Linear(embed_size, embed_size)
        self.to_key = nn.Linear(embed_size, embed_size)
        self.to_value = nn.Linear(embed_size, embed_size)

    def forward(self, x):
        Q, K, V = self.to_query(x), self.to_key(x), self.to_value(x)
        K = K.softmax(dim=1)
        context = torch.einsum('bnd,bne->bde', K, V)
        return torch.einsum('bnd,bde->bne', Q, context)


def mha_init(rng, m):
    for lin in (m.Wq, m.Wk, m.Wv, m.fc_out):
        init_linear(rng, lin)


def mha_params(prefix, m, names=("Wq", "Wk", "Wv", "fc_out")):
    return {"%s%s.%s" % (prefix, n, p): getattr(getattr(m, n), p) for n in names for p in ("weight", "bias")}


def seed002():
    x = x002
    rng = Pcg32(0)
    sa = SelfAttention(8)
    for lin in (sa.Wq, sa.Wk, sa.Wv):
        init_linear(rng, lin)
    Q, K, V = sa(x)
    qkv = {"x": x, "Q": Q, "K": K, "V": V, **mha_params("", sa, ("Wq", "Wk", "Wv"))}
    out, w = scaled_dot_product_attention(Q, K, V)
    save("002/1.2", qkv)
    save("002/2.1", {**qkv, "output": out, "attn_weights": w})
    save("002/2.2", {**qkv, "attn_weights": w})

    rng = Pcg32(0)
    mha = MultiHeadAttention(8, 2)
    mha_init(rng, mha)
    out, w = mha(x, x, x)
    save("002/3.2", {"x": x, **mha_params("", mha), "output": out, "attn_weights": w})
    save("002/3.3", {"attn_weights": w})

    # 4.2: the tutorial never defines src and tgt: src = x, tgt = 3 words drawn like x
    rng = Pcg32(0)
    tgt = torch.tensor(np.array([F32(math.floor(float(rng.uniform() * F32(20.0)) + 0.5)) / F32(10.0)
                                 for _ in range(24)], dtype=np.float32)).reshape(1, 3, 8)
    enc, dec, cross = MultiHeadAttention(8, 2), MultiHeadAttention(8, 2), MultiHeadAttention(8, 2)
    for m in (enc, dec, cross):
        mha_init(rng, m)
    src = x
    encoder_output, _ = enc(src, src, src)
    mask = torch.tril(torch.ones(3, 3))
    mask = mask.masked_fill(mask == 0, float('-inf'))  # the tutorial's create_mask(3)
    decoder_output, _ = dec(tgt, tgt, tgt, mask)
    cross_output, _ = cross(decoder_output, encoder_output, encoder_output)
    save("002/4.2", {"src": src, "tgt": tgt, **mha_params("encoder_self_attn.", enc),
                     **mha_params("decoder_self_attn.", dec), **mha_params("cross_attn.", cross),
                     "encoder_output": encoder_output, "decoder_output": decoder_output,
                     "cross_output": cross_output})

    rng = Pcg32(0)
    blk = TransformerBlock(8, 2, 32)
    mha_init(rng, blk.attention)
    init_linear(rng, blk.feed_forward[0])
    init_linear(rng, blk.feed_forward[2])
    blk.eval()
    ff = {"feed_forward.%d.%s" % (i, p): getattr(blk.feed_forward[i], p) for i in (0, 2) for p in ("weight", "bias")}
    save("002/4.3", {**mha_params("attention.", blk.attention), **ff, "output": blk(x)})

    rng = Pcg32(0)
    ca = ConvAttention(8, 2)
    mha_init(rng, ca.attention)
    with torch.no_grad():
        ca.conv.weight.copy_(rng.weights(ca.conv.weight.shape, 8 * 3))
        ca.conv.bias.copy_(rng.weights(ca.conv.bias.shape, 8 * 3))
    save("002/5.2", {**mha_params("attention.", ca.attention), "conv.weight": ca.conv.weight,
                     "conv.bias": ca.conv.bias, "output": ca(x)})

    rng = Pcg32(0)
    ea = EfficientAttention(8)
    for lin in (ea.to_query, ea.to_key, ea.to_value):
        init_linear(rng, lin)
    save("002/5.3", {**dict(ea.named_parameters()), "output": ea(x)})


# ---- seed 003: Nadaraya-Watson with the fixed kernel on the tutorial's data ----

def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32"
        a, b = h["data_offsets"]
        out[name] = torch.tensor(np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").copy()).reshape(h["shape"])
    return out


class NWKernelRegression(nn.Module):  # seed 003's listing
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(1.0))

    def forward(self, queries, keys, values):
        dis = queries.unsqueeze(1) - keys
        scores = -0.5 * (self.w * dis) ** 2
        self.attention_weights = torch.softmax(scores, dim=1)
        return torch.sum(self.attention_weights * values, dim=1)


def seed003_nw():
    d = read_safetensors("tests/golden/nw_seed003.safetensors")
    model = NWKernelRegression()  # w = 1: the fixed Gaussian kernel K(u) = exp(-u^2 / 2)
    n = len(d["x_test"])
    y_hat = model(d["x_test"], d["x_train"].repeat(n, 1), d["y_train"].repeat(n, 1))
    save("003/nw-fixed", {"y_hat": y_hat, "attention_weights": model.attention_weights})


# ---- seed 003: scoring functions with D2L's example values ----

def masked_softmax(X, valid_lens):
    """Softmax over the last axis with keys j >= valid_len replaced by -1e6 (D2L)."""
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    lens = torch.repeat_interleave(valid_lens, shape[1]) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1]).clone()
    keep = torch.arange(shape[-1])[None, :] < lens[:, None]
    X[~keep] = -1e6
    return F.softmax(X.reshape(shape), dim=-1)


def d2l_keys_values():
    return torch.ones((2, 10, 2)), torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)


def seed003_scoring():
    rng = Pcg32(0)
    X1, X2 = rng.rand(2, 2, 4), rng.rand(2, 2, 4)
    save("003/masked-softmax", {"X1": X1, "X2": X2, "out1": masked_softmax(X1, torch.tensor([2, 3])),
                                "out2": masked_softmax(X2, torch.tensor([[1, 3], [2, 4]]))})

    keys, values = d2l_keys_values()
    lens = torch.tensor([2, 6])
    rng = Pcg32(0)
    queries = rng.randn(2, 1, 20)
    W_k, W_q, w_v = nn.Linear(2, 8, bias=False), nn.Linear(20, 8, bias=False), nn.Linear(8, 1, bias=False)
    for lin in (W_k, W_q, w_v):  # AdditiveAttention registers W_k, W_q, w_v
        init_linear(rng, lin)
    features = torch.tanh(W_q(queries).unsqueeze(2) + W_k(keys).unsqueeze(1))
    weights = masked_softmax(w_v(features).squeeze(-1), lens)
    save("003/additive", {"queries": queries, "W_k.weight": W_k.weight, "W_q.weight": W_q.weight,
                          "w_v.weight": w_v.weight, "output": torch.bmm(weights, values),
                          "attention_weights": weights})

    rng = Pcg32(0)
    queries = rng.randn(2, 1, 2)
    weights = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(2), lens)
    Q, K, V = rng.randn(1, 4, 8), rng.randn(1, 4, 8), rng.randn(1, 4, 8)
    A = F.softmax(Q @ K.transpose(1, 2) / math.sqrt(8), dim=-1)
    save("003/dot", {"queries": queries, "output": torch.bmm(weights, values), "attention_weights": weights,
                     "Q": Q, "K": K, "V": V, "A": A, "O": A @ V})


def d2l_mha(rng, queries, keys, valid_lens, heads=5):
    """D2L's MultiHeadAttention(bias=False), eval: W_q, W_k, W_v, W_o; heads folded into the batch."""
    h = queries.shape[-1]
    lins = [nn.Linear(h, h, bias=False) for _ in range(4)]
    for lin in lins:
        init_linear(rng, lin)

    def split(x):
        b, n, _ = x.shape
        return x.reshape(b, n, heads, -1).permute(0, 2, 1, 3).reshape(b * heads, n, -1)

    q, k, v = split(lins[0](queries)), split(lins[1](keys)), split(lins[2](keys))
    lens = torch.repeat_interleave(valid_lens, heads)
    w = masked_softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1]), lens)
    o = torch.bmm(w, v)
    b, n = queries.shape[0], queries.shape[1]
    o = o.reshape(b, heads, n, -1).permute(0, 2, 1, 3).reshape(b, n, -1)
    return lins[3](o), w.reshape(b, heads, n, -1)


def seed003_multihead():
    rng = Pcg32(0)
    X, Y, lens = torch.ones((2, 4, 100)), torch.ones((2, 6, 100)), torch.tensor([3, 2])
    out, w = d2l_mha(rng, X, Y, lens)
    self_out, _ = d2l_mha(rng, X, X, lens)
    # the 80,000 weights are left out (320 KB); the outputs depend on every one of them
    save("003/multihead", {"output": out, "attention_weights": w, "self.output": self_out})


# ---- seed 003: positional encoding and the Transformer's blocks (D2L) ----

def seed003_positional():
    max_len, d = 1000, 32
    P = torch.zeros((1, max_len, d))
    X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, d, 2, dtype=torch.float32) / d)
    P[:, :, 0::2] = torch.sin(X)
    P[:, :, 1::2] = torch.cos(X)
    save("003/positional", {"P": P[0, :60, :]})


def attention_d2l(rng, h=24, heads=8):
    lins = [nn.Linear(h, h, bias=False) for _ in range(4)]
    for lin in lins:
        init_linear(rng, lin)

    def run(queries, keys, valid_lens):
        def split(x):
            b, n, _ = x.shape
            return x.reshape(b, n, heads, -1).permute(0, 2, 1, 3).reshape(b * heads, n, -1)

        q, k, v = split(lins[0](queries)), split(lins[1](keys)), split(lins[2](keys))
        lens = torch.repeat_interleave(valid_lens, heads, dim=0)
        w = masked_softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1]), lens)
        b, n = queries.shape[0], queries.shape[1]
        o = torch.bmm(w, v).reshape(b, heads, n, -1).permute(0, 2, 1, 3).reshape(b, n, -1)
        return lins[3](o)
    return run


def ffn_d2l(rng, d_in, hidden, d_out):
    dense1, dense2 = nn.Linear(d_in, hidden), nn.Linear(hidden, d_out)
    init_linear(rng, dense1)
    init_linear(rng, dense2)
    return (lambda x: dense2(F.relu(dense1(x)))), dense1, dense2


def seed003_transformer():
    rng = Pcg32(0)
    ffn, dense1, dense2 = ffn_d2l(rng, 4, 4, 8)
    ones = torch.ones((2, 3, 4))
    add_norm = nn.LayerNorm(4)(ones + ones)
    small = {"ffn.dense1.weight": dense1.weight, "ffn.dense1.bias": dense1.bias,
             "ffn.dense2.weight": dense2.weight, "ffn.dense2.bias": dense2.bias,
             "ffn_output": ffn(ones), "add_norm_output": add_norm}

    enc_attn = attention_d2l(rng)
    enc_ffn, _, _ = ffn_d2l(rng, 24, 48, 24)
    dec_attn1, dec_attn2 = attention_d2l(rng), attention_d2l(rng)
    dec_ffn, _, _ = ffn_d2l(rng, 24, 48, 24)
    ln = lambda x: F.layer_norm(x, (24,), eps=1e-5)
    X, valid_lens = torch.ones((2, 100, 24)), torch.tensor([3, 2])
    Y = ln(X + enc_attn(X, X, valid_lens))
    enc_out = ln(Y + enc_ffn(Y))
    causal = torch.arange(1, 101).repeat(2, 1)  # dec_valid_lens while training: position i sees 0..i
    X2 = ln(X + dec_attn1(X, X, causal))
    Y2 = ln(X2 + dec_attn2(X2, enc_out, valid_lens))
    dec_out = ln(Y2 + dec_ffn(Y2))
    save("003/transformer", {**small, "encoder_output": enc_out, "decoder_output": dec_out})


if __name__ == "__main__":
    with torch.no_grad():
        seed000()
        seed002()
        seed003_nw()
        seed003_scoring()
        seed003_multihead()
        seed003_positional()
        seed003_transformer()
