#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_golden_models.c compares libattn's positional
encodings, Transformer layers, GRU and seq2seq models against:
tests/golden/model_<case>.safetensors.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_models.py

The oracle is torch in float64 on float32 values: parameters and inputs are made in float32
(torch's own init and RNG), then the module and inputs are converted with .double(), the forward
and backward run in float64, and every result is rounded to float32. So the reference carries no
float32 rounding of its own and the C test's tolerance is spent on libattn's alone (torch's
float32 GRU backward is itself up to 1.8x the 1e-5 + 1e-4 tolerance away from float64 on the
trained Bahdanau model, while libattn's stays within 0.25x).

Every module runs with dropout 0 in train() mode: dropout(p=0) is the identity, so this is the
eval function, and train() keeps torch 1.13 off its inference fast paths (the fused
_transformer_encoder_layer_fwd and MHA kernels). Every file holds, as applicable:
  the float inputs under their names (x, memory, h0) as F32, integer inputs (src, src_lens,
  tgt_in, tgt_lens) as I64, masks as BOOL in PyTorch's polarity (true = padding);
  the parameters under libattn's registered names, which are torch's state_dict names of the
  module built here (prefix "" for layers);
  out = the output (seq2seq: the teacher-forced logits (B, T, V_tgt)) and grad_out, a random
  upstream gradient; the GRU also h_n and grad_h_n;
  grad.<input> and grad.<param> = d loss / d that tensor for
  loss = sum(out * grad_out) (+ sum(h_n * grad_h_n) for the GRU).

Cases (options in the metadata and mirrored in the C test's table):
  sinusoidal             table (9, 6): D2L's PositionalEncoding (float32 as D2L computes it,
                         P[:, 0::2] = sin(X), P[:, 1::2] = cos(X), X = i / 10000^(arange(0,d,2)/d)),
                         and table_concat, the same angles as [sin | cos] halves.
  learned_pe             x (2, 5, 6) + pos_encoding[:, :5] with pos_encoding (1, 9, 6).
  enc_{post,pre}_{relu,gelu}  nn.TransformerEncoderLayer(16, 4, 24, dropout=0, batch_first=True,
                         norm_first=pre, activation) on x (2, 5, 16) with src_key_padding_mask.
  dec_post_relu, dec_pre_gelu  nn.TransformerDecoderLayer(16, 4, 24, dropout=0, batch_first=True)
                         on x (2, 6, 16), memory (2, 5, 16), tgt_mask causal
                         (generate_square_subsequent_mask), tgt_key_padding_mask and
                         memory_key_padding_mask.
  gru_h0, gru_noh0       nn.GRU(5, 7, num_layers=2, batch_first=True) on x (3, 4, 5), with and
                         without h0 (2, 3, 7).
  s2s_transformer        the Transformer of src/models/seq2seq_transformer.c: d 16, 4 heads, FFN
                         24, 2 + 2 post-LN layers, vocab 11 / 13, pad 1, bos 2, eos 3; embeddings
                         with padding_idx = pad, * sqrt(d), + interleaved sinusoidal PE (the table
                         computed in float64 and rounded, as the C code does), encoder and decoder
                         layers (no final LayerNorm), generator Linear. Teacher forcing with a
                         source / target batch of different lengths.
  s2s_bahdanau           D2L's Seq2SeqEncoder + Seq2SeqAttentionDecoder (GRU 2 layers, seq-first
                         as D2L, additive attention with valid_lens = src_lens, GRU input
                         cat(context, embedding), dense), d 8, vocab 11 / 13.
  Both seq2seq models are first trained briefly (Adam, float32) on a toy copy task (copy_batch):
  an untrained model's greedy decode repeats one token, a trained one stops with <eos> at
  different lengths, so the decoding checks exercise the stopping rules.
  Both seq2seq files also hold greedy.out (B, greedy_max_out) and greedy.lens (B) as I64: a
  greedy decode of src done here with the rules of attn_seq2seq_decode's greedy search (start from <bos>, decode the
  whole prefix again each step without target padding mask, argmax (first maximum), a finished row
  is padded; lengths without <eos>), and metadata greedy_margin, the smallest gap between the best
  and second-best logit over those decisions (the script asserts it is far above float noise).

In the layer cases, parameters that torch initialises to constants (biases, LayerNorm) are
randomised so that each one matters (the seq2seq models are trained instead); the layers of a
stack are built one by one (independent weights; nn.TransformerEncoder would deep-copy one).

Deterministic on one machine: torch.manual_seed(crc32(case name)) per case, one thread (a rerun
there rewrites identical bytes). On another CPU or BLAS the float32 training of the two seq2seq
models takes another path from the last bits on: other parameters, other greedy ids, another
greedy_margin, all as valid (tests/golden/README.md); the float64 layer cases keep their bytes but
for the rounding noise of the key block of in_proj_bias's gradient, 0 in exact arithmetic.
"""
import math
import os
import zlib

import torch
import torch.nn as nn

OUT_DIR = os.path.join("tests", "golden")
from safetensors_writer import write_safetensors  # noqa: E402 (the script folder is on sys.path)

D, HEADS, FFN = 16, 4, 24
SRC_VOCAB, TGT_VOCAB, PAD, BOS, EOS = 11, 13, 1, 2, 3
GREEDY_MAX_OUT = 6  # the first greedy row (6 words) is cut there; the others end with <eos>
MIN_MARGIN = 1e-2  # argmax gaps below this could flip between this oracle and libattn's float32


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def randomize_constants(module):
    """Biases and LayerNorm parameters start as 0 / 1 in torch: jitter them so each matters."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias") or ".norm" in name or name.startswith("norm"):
                p.add_(0.2 * torch.randn_like(p))


def padding_mask(lens, width):
    return torch.arange(width)[None, :] >= lens[:, None]  # true = padding


def golden(name, module, inputs, forward, out_names, meta):
    """The oracle: forward(module, inputs) -> outputs, run in float64 on the float32 values of the
    parameters and inputs; then the backward of loss = sum_i sum(out_i * grad_<out_i>) (random
    float32 upstream gradients). Writes model_<name>.safetensors with the inputs, parameters,
    outputs, upstream gradients and grad.<float input>, grad.<param>, all rounded to float32."""
    if module is not None:
        module.double()
    x64 = {n: leaf(t.double()) if t.is_floating_point() else t for n, t in inputs.items()}
    outs = forward(module, x64)
    tensors = dict(inputs)
    params = list(module.named_parameters()) if module is not None else []
    tensors.update({n: p for n, p in params})
    loss = 0
    for n, t in zip(out_names, outs):
        g = torch.randn(t.shape)
        tensors[n], tensors["grad_" + n] = t, g
        loss = loss + (t * g.double()).sum()
    loss.backward()
    for n, t in x64.items():
        if t.is_floating_point():
            tensors["grad." + n] = t.grad
    for n, p in params:
        tensors["grad." + n] = p.grad if p.grad is not None else torch.zeros_like(p)
    save_tensors(name, tensors, meta)


def save_tensors(name, tensors, meta):
    tensors = {n: t.detach().float() if t.is_floating_point() else t for n, t in tensors.items()}
    for n, t in tensors.items():
        assert t is not None and (t.dtype != torch.float32 or torch.isfinite(t).all()), (name, n)
    write_safetensors(os.path.join(OUT_DIR, "model_%s.safetensors" % name), tensors, meta)


# ---------------------------------------------------------------------------------------------
# Positional encodings
# ---------------------------------------------------------------------------------------------
class PositionalEncoding(nn.Module):
    """D2L's (d2l.ai, "Self-Attention and Positional Encoding"), dropout left out."""

    def __init__(self, num_hiddens, max_len=1000):
        super().__init__()
        self.P = torch.zeros((1, max_len, num_hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
        self.P[:, :, 0::2] = torch.sin(X)
        self.P[:, :, 1::2] = torch.cos(X)


def sinusoidal_case():
    max_len, d = 9, 6
    table = PositionalEncoding(d, max_len).P[0]
    X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, d, 2, dtype=torch.float32) / d)
    concat = torch.cat([torch.sin(X), torch.cos(X)], dim=1)
    save_tensors("sinusoidal", {"table": table, "table_concat": concat},
                 {"kind": "sinusoidal", "max_len": max_len, "d": d})


def learned_pe_case():
    name = "learned_pe"
    seed(name)
    m = nn.Module()
    m.pos_encoding = nn.Parameter(torch.randn(1, 9, 6))
    golden(name, m, {"x": torch.randn(2, 5, 6)},
           lambda m, t: [t["x"] + m.pos_encoding[:, :t["x"].shape[1]]], ["out"],
           {"kind": "learned_pe", "max_len": 9})


def sinusoidal_f64(max_len, d):
    """The table as src/nn/positional.c computes it: angles and sin/cos in double, then float."""
    i = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = i / torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
    P = torch.zeros(max_len, d, dtype=torch.float64)
    P[:, 0::2], P[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return P.float()


# ---------------------------------------------------------------------------------------------
# Transformer layers
# ---------------------------------------------------------------------------------------------
def encoder_layer(norm_first, act):
    return nn.TransformerEncoderLayer(D, HEADS, FFN, dropout=0.0, activation=act,
                                      batch_first=True, norm_first=norm_first)


def decoder_layer(norm_first, act):
    return nn.TransformerDecoderLayer(D, HEADS, FFN, dropout=0.0, activation=act,
                                      batch_first=True, norm_first=norm_first)


def causal_mask(n, dtype):
    """generate_square_subsequent_mask: -inf above the diagonal (in the dtype of the scores)."""
    return nn.Transformer.generate_square_subsequent_mask(n).to(dtype)


def enc_case(norm_first, act, unbatched=False):
    """unbatched: src (S, E) and src_key_padding_mask (S), as torch takes one sequence"""
    name = "enc_%s_%s%s" % ("pre" if norm_first else "post", act, "_unbatched" if unbatched else "")
    seed(name)
    m = encoder_layer(norm_first, act).train()
    randomize_constants(m)
    if unbatched:
        inputs = {"x": torch.randn(5, D), "key_padding_mask": padding_mask(torch.tensor([3]), 5)[0]}
    else:
        inputs = {"x": torch.randn(2, 5, D), "key_padding_mask": padding_mask(torch.tensor([5, 3]), 5)}
    golden(name, m, inputs, lambda m, t: [m(t["x"], src_key_padding_mask=t["key_padding_mask"])],
           ["out"], {"kind": "encoder_layer", "norm_first": int(norm_first),
                     "gelu": int(act == "gelu")})


def dec_case(norm_first, act, unbatched=False):
    """unbatched: tgt (T, E), memory (S, E), key padding masks (T) and (S)"""
    name = "dec_%s_%s%s" % ("pre" if norm_first else "post", act, "_unbatched" if unbatched else "")
    seed(name)
    m = decoder_layer(norm_first, act).train()
    randomize_constants(m)
    lt, ls = 6, 5
    inputs = {"x": torch.randn(2, lt, D), "memory": torch.randn(2, ls, D),
              "tgt_key_padding_mask": padding_mask(torch.tensor([6, 4]), lt),
              "memory_key_padding_mask": padding_mask(torch.tensor([3, 5]), ls)}
    if unbatched:  # the second sequence of the pair: both masks pad
        inputs = {n: t[1] for n, t in inputs.items()}

    def forward(m, t):
        return [m(t["x"], t["memory"], tgt_mask=causal_mask(lt, t["x"].dtype),
                  tgt_key_padding_mask=t["tgt_key_padding_mask"],
                  memory_key_padding_mask=t["memory_key_padding_mask"])]
    golden(name, m, inputs, forward, ["out"],
           {"kind": "decoder_layer", "norm_first": int(norm_first), "gelu": int(act == "gelu"),
          "tgt_mask": "causal"})


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------
def gru_case(with_h0):
    name = "gru_h0" if with_h0 else "gru_noh0"
    seed(name)
    m = nn.GRU(input_size=5, hidden_size=7, num_layers=2, batch_first=True).train()
    inputs = {"x": torch.randn(3, 4, 5)}
    if with_h0:
        inputs["h0"] = torch.randn(2, 3, 7)
    golden(name, m, inputs, lambda m, t: list(m(t["x"], t.get("h0"))), ["out", "h_n"],
           {"kind": "gru", "input_size": 5, "hidden_size": 7, "num_layers": 2})


# ---------------------------------------------------------------------------------------------
# Seq2seq models
# ---------------------------------------------------------------------------------------------
class Seq2SeqTransformer(nn.Module):
    """src/models/seq2seq_transformer.c in torch: same names, same math."""

    def __init__(self, layers=2):
        super().__init__()
        self.src_embedding = nn.Embedding(SRC_VOCAB, D, padding_idx=PAD)
        self.tgt_embedding = nn.Embedding(TGT_VOCAB, D, padding_idx=PAD)
        self.encoder, self.decoder = nn.Module(), nn.Module()
        self.encoder.layers = nn.ModuleList([encoder_layer(False, "relu") for _ in range(layers)])
        self.decoder.layers = nn.ModuleList([decoder_layer(False, "relu") for _ in range(layers)])
        self.generator = nn.Linear(D, TGT_VOCAB)

    def embed(self, emb, ids):
        x = emb(ids) * math.sqrt(D)
        return x + sinusoidal_f64(ids.shape[1], D).to(x.dtype)

    def forward(self, src, src_lens, tgt, tgt_lens):
        src_pad = padding_mask(src_lens, src.shape[1])
        x = self.embed(self.src_embedding, src)
        for layer in self.encoder.layers:
            x = layer(x, src_key_padding_mask=src_pad)
        y = self.embed(self.tgt_embedding, tgt)
        tgt_pad = padding_mask(tgt_lens, tgt.shape[1]) if tgt_lens is not None else None
        for layer in self.decoder.layers:
            y = layer(y, x, tgt_mask=causal_mask(tgt.shape[1], y.dtype),
                      tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        return self.generator(y)


def masked_softmax(X, valid_lens):
    """D2L's: keys j >= valid_len get -1e6 before the softmax (valid_lens (B) here)."""
    shape = X.shape
    lens = torch.repeat_interleave(valid_lens, shape[1])
    X = X.reshape(-1, shape[-1])
    keep = torch.arange(shape[-1], dtype=torch.float32)[None, :] < lens[:, None]
    X = torch.where(keep, X, X.new_tensor(-1e6))
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class AdditiveAttention(nn.Module):
    """D2L's, dropout 0."""

    def __init__(self, key_size, query_size, num_hiddens):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)
        return torch.bmm(masked_softmax(scores, valid_lens), values)


class Seq2SeqBahdanau(nn.Module):
    """D2L's Seq2SeqEncoder + Seq2SeqAttentionDecoder (seq-first GRUs, as D2L), dropout 0."""

    def __init__(self, h=8, layers=2):
        super().__init__()
        self.encoder, self.decoder = nn.Module(), nn.Module()
        self.encoder.embedding = nn.Embedding(SRC_VOCAB, h)
        self.encoder.rnn = nn.GRU(h, h, layers)
        self.decoder.attention = AdditiveAttention(h, h, h)
        self.decoder.embedding = nn.Embedding(TGT_VOCAB, h)
        self.decoder.rnn = nn.GRU(h + h, h, layers)
        self.decoder.dense = nn.Linear(h, TGT_VOCAB)

    def forward(self, src, src_lens, tgt, tgt_lens=None):
        enc_outputs, hidden_state = self.encoder.rnn(self.encoder.embedding(src).permute(1, 0, 2))
        enc_outputs = enc_outputs.permute(1, 0, 2)  # init_state: (B, S, h)
        outputs = []
        for x in self.decoder.embedding(tgt).permute(1, 0, 2):
            query = torch.unsqueeze(hidden_state[-1], dim=1)
            context = self.decoder.attention(query, enc_outputs, enc_outputs, src_lens)
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            out, hidden_state = self.decoder.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
        return self.decoder.dense(torch.cat(outputs, dim=0)).permute(1, 0, 2)


def greedy(model, src, src_lens, max_out):
    """the rules of attn_seq2seq_decode's greedy search (the row keeps <eos>); returns out (B, max_out), lens (B), the smallest argmax gap."""
    b = src.shape[0]
    prefix = torch.full((b, 1), BOS, dtype=torch.int64)
    out = torch.full((b, max_out), PAD, dtype=torch.int64)
    lens = torch.full((b,), -1, dtype=torch.int64)
    margin = math.inf
    with torch.no_grad():
        for t in range(1, max_out + 1):
            if (lens >= 0).all():
                break
            logits = model(src, src_lens, prefix, None)[:, -1]
            top2 = torch.topk(logits, 2, dim=-1).values
            nxt = torch.full((b,), PAD, dtype=torch.int64)
            for r in range(b):
                if lens[r] >= 0:
                    continue
                tok = int(torch.argmax(logits[r]))  # the first maximum, as the C loop
                margin = min(margin, float(top2[r, 0] - top2[r, 1]))
                nxt[r] = tok
                out[r, t - 1] = tok
                if tok == EOS or t == max_out:
                    lens[r] = t - 1 if tok == EOS else t
            prefix = torch.cat([prefix, nxt[:, None]], dim=1)
    return out, lens, margin


def copy_batch(n, max_words=6):
    """The toy task the seq2seq models are trained on: src = words + <eos> (source ids 4..10),
    target y = the same words shifted by 2 (target ids 6..12): tgt_in = <bos> + y,
    label = y + <eos>."""
    lens = torch.randint(1, max_words + 1, (n,))
    width = max_words + 1
    src = torch.full((n, width), PAD, dtype=torch.int64)
    tgt_in, label = src.clone(), src.clone()
    for r in range(n):
        w = torch.randint(4, SRC_VOCAB, (int(lens[r]),))
        src[r, :lens[r]], src[r, lens[r]] = w, EOS
        tgt_in[r, 0], tgt_in[r, 1:lens[r] + 1] = BOS, w + 2
        label[r, :lens[r]], label[r, lens[r]] = w + 2, EOS
    return src, lens + 1, tgt_in, lens + 1, label


def train_copy(model, steps, lr):
    """A short Adam run on copy_batch, so that greedy decoding is not degenerate (an untrained
    model repeats one token): rows end with <eos> at different lengths."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        src, src_lens, tgt_in, tgt_lens, label = copy_batch(32)
        logits = model(src, src_lens, tgt_in, tgt_lens)
        loss = nn.functional.cross_entropy(logits.reshape(-1, TGT_VOCAB), label.reshape(-1),
                                           ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.zero_grad()
    return float(loss)


def s2s_case(name, model, steps, lr):
    """Teacher-forced logits and grads of every parameter, plus a greedy decode of src."""
    loss = train_copy(model, steps, lr)
    src = torch.tensor([[4, 5, 6, 7, 8, 9, 3],
                        [5, 9, 4, 3, 1, 1, 1],
                        [10, 6, 3, 1, 1, 1, 1]], dtype=torch.int64)
    src_lens = torch.tensor([7, 4, 3], dtype=torch.int64)
    tgt_in = torch.tensor([[2, 6, 7, 8, 9, 12],
                           [2, 12, 11, 1, 1, 1],
                           [2, 9, 10, 4, 5, 1]], dtype=torch.int64)
    tgt_lens = torch.tensor([6, 3, 5], dtype=torch.int64)
    model.double()  # the oracle, greedy included, runs in float64 from here on
    g_out, g_lens, margin = greedy(model, src, src_lens, GREEDY_MAX_OUT)
    assert margin > MIN_MARGIN, (name, margin)
    print("%s: train loss %.3f, greedy %s lens %s, margin %.3g"
          % (name, loss, g_out.tolist(), g_lens.tolist(), margin))
    inputs = {"src": src, "src_lens": src_lens, "tgt_in": tgt_in, "tgt_lens": tgt_lens,
              "greedy.out": g_out, "greedy.lens": g_lens}
    golden(name, model, inputs,
           lambda m, t: [m(t["src"], t["src_lens"], t["tgt_in"], t["tgt_lens"])], ["out"],
           {"kind": name, "pad": PAD, "bos": BOS, "eos": EOS, "greedy_max_out": GREEDY_MAX_OUT,
            "greedy_margin": "%.6g" % margin, "train_steps": steps})


def s2s_transformer_case():
    name = "s2s_transformer"
    seed(name)
    s2s_case(name, Seq2SeqTransformer().train(), steps=300, lr=1e-2)


def s2s_bahdanau_case():
    name = "s2s_bahdanau"
    seed(name)
    s2s_case(name, Seq2SeqBahdanau().train(), steps=500, lr=1e-2)


def main():
    torch.set_num_threads(1)  # one summation order, whatever the machine
    sinusoidal_case()
    learned_pe_case()
    for norm_first in (False, True):
        for act in ("relu", "gelu"):
            enc_case(norm_first, act)
    dec_case(False, "relu")
    dec_case(True, "gelu")
    enc_case(False, "relu", unbatched=True)
    dec_case(True, "gelu", unbatched=True)
    gru_case(True)
    gru_case(False)
    s2s_transformer_case()
    s2s_bahdanau_case()


if __name__ == "__main__":
    main()
