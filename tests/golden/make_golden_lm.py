#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_golden_lm.c holds attn_lm to:
tests/golden/lm_<case>.safetensors.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_lm.py

Each model is composed here from its architecture's definition, not from attn's code:
  - GPT-2 (Radford et al. 2019, as nanoGPT's model.py writes it): wte + wpe, pre-LN blocks of
    LayerNorm with bias, causal multi-head attention from one c_attn projection (q, k, v column
    blocks), GELU in its tanh form, a final LayerNorm, logits against wte (tied);
  - Llama (as llama2.c's model.py and Hugging Face's LlamaModel write it): RMSNorm
    x / sqrt(mean(x^2) + eps) * w, q and k rotated by RoPE (halves: rotate_half; interleaved:
    Meta's complex pairs), grouped-query attention (each key/value head repeated for
    H / Hkv query heads), SwiGLU w2(silu(w1 x) * w3 x), no biases, tied or untied output.
Weights are random (norm weights and biases too, so that a dropped term shows) and the model runs
in float64 on the float32 values, rounded to float32 at the end. Each file holds three sequences
of different lengths, each run alone (positions from 0, no attention across them), their logits
concatenated in order as attn_lm_forward packs them; loss = mean cross-entropy of the targets
over every token; every parameter's gradient as grad.<name>.

Tensors: the parameters under attn's names (attn.h), ids and targets (I64, the packed tokens and
their next tokens), cu_seqlens (I64), logits (total, V), loss (scalar). Metadata: the config.
Deterministic: torch.manual_seed(crc32(name)).
"""
import math
import os
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_writer import write_safetensors  # noqa: E402

OUT_DIR = os.path.join("tests", "golden")

CASES = {
    # name: style, V, context, E, layers, H, Hkv, ffn, eps, rope base, interleaved, untied, lengths
    "gpt2": ("gpt2", 37, 12, 24, 2, 4, 4, 96, 1e-5, 0.0, False, False, [5, 9, 3]),
    "llama_gqa_untied": ("llama", 41, 16, 32, 2, 4, 2, 96, 1e-5, 10000.0, False, True, [7, 1, 11]),
    "llama_mqa_tied_interleaved": ("llama", 29, 10, 16, 3, 2, 1, 48, 1e-6, 500.0, True, False, [4, 10, 6]),
}


def gpt2_params(V, ctx, E, layers, F, rnd):
    p = {"transformer.wte.weight": rnd(V, E), "transformer.wpe.weight": rnd(ctx, E)}
    for i in range(layers):
        h = f"transformer.h.{i}."
        p.update({h + "ln_1.weight": 1 + rnd(E), h + "ln_1.bias": rnd(E),
                  h + "attn.c_attn.weight": rnd(3 * E, E), h + "attn.c_attn.bias": rnd(3 * E),
                  h + "attn.c_proj.weight": rnd(E, E), h + "attn.c_proj.bias": rnd(E),
                  h + "ln_2.weight": 1 + rnd(E), h + "ln_2.bias": rnd(E),
                  h + "mlp.c_fc.weight": rnd(F, E), h + "mlp.c_fc.bias": rnd(F),
                  h + "mlp.c_proj.weight": rnd(E, F), h + "mlp.c_proj.bias": rnd(E)})
    p.update({"transformer.ln_f.weight": 1 + rnd(E), "transformer.ln_f.bias": rnd(E)})
    return p


def llama_params(V, E, layers, H, Hkv, F, untied, rnd):
    Ekv = E // H * Hkv
    p = {"tok_embeddings.weight": rnd(V, E)}
    for i in range(layers):
        h = f"layers.{i}."
        p.update({h + "attention_norm.weight": 1 + rnd(E),
                  h + "attention.wq.weight": rnd(E, E), h + "attention.wk.weight": rnd(Ekv, E),
                  h + "attention.wv.weight": rnd(Ekv, E), h + "attention.wo.weight": rnd(E, E),
                  h + "ffn_norm.weight": 1 + rnd(E),
                  h + "feed_forward.w1.weight": rnd(F, E), h + "feed_forward.w2.weight": rnd(E, F),
                  h + "feed_forward.w3.weight": rnd(F, E)})
    p["norm.weight"] = 1 + rnd(E)
    if untied:
        p["output.weight"] = rnd(V, E)
    return p


def causal_attention(q, k, v):
    """q (H, n, d), k and v (H, n, d): softmax(q k^T / sqrt d + causal) v"""
    n, d = q.shape[1], q.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_forward(p, ids, layers, H, eps):
    n = ids.shape[0]
    x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][:n]
    ln = lambda x, pre: torch.nn.functional.layer_norm(x, x.shape[-1:], p[pre + ".weight"], p[pre + ".bias"], eps)  # noqa: E731
    E = x.shape[1]
    for i in range(layers):
        h = f"transformer.h.{i}."
        qkv = ln(x, h + "ln_1") @ p[h + "attn.c_attn.weight"].T + p[h + "attn.c_attn.bias"]
        q, k, v = (t.reshape(n, H, E // H).transpose(0, 1) for t in qkv.split(E, dim=1))
        a = causal_attention(q, k, v).transpose(0, 1).reshape(n, E)
        x = x + a @ p[h + "attn.c_proj.weight"].T + p[h + "attn.c_proj.bias"]
        m = gelu_tanh(ln(x, h + "ln_2") @ p[h + "mlp.c_fc.weight"].T + p[h + "mlp.c_fc.bias"])
        x = x + m @ p[h + "mlp.c_proj.weight"].T + p[h + "mlp.c_proj.bias"]
    return ln(x, "transformer.ln_f") @ p["transformer.wte.weight"].T


def rope(x, base, interleaved):
    """x (H, n, d) rotated at positions 0..n-1: pairs (2i, 2i+1) (Meta's complex form) or
    (i, i + d/2) (rotate_half), theta_i = pos base^(-2i/d)"""
    H, n, d = x.shape
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]  # (n, d/2)
    cos, sin = torch.cos(ang), torch.sin(ang)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).reshape(H, n, d)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def llama_forward(p, ids, layers, H, Hkv, eps, base, interleaved):
    n = ids.shape[0]
    x = p["tok_embeddings.weight"][ids]
    E = x.shape[1]
    d = E // H
    rms = lambda x, w: x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w  # noqa: E731
    for i in range(layers):
        h = f"layers.{i}."
        y = rms(x, p[h + "attention_norm.weight"])
        q = (y @ p[h + "attention.wq.weight"].T).reshape(n, H, d).transpose(0, 1)
        k = (y @ p[h + "attention.wk.weight"].T).reshape(n, Hkv, d).transpose(0, 1)
        v = (y @ p[h + "attention.wv.weight"].T).reshape(n, Hkv, d).transpose(0, 1)
        q, k = rope(q, base, interleaved), rope(k, base, interleaved)
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)
        a = causal_attention(q, k, v).transpose(0, 1).reshape(n, E)
        x = x + a @ p[h + "attention.wo.weight"].T
        y = rms(x, p[h + "ffn_norm.weight"])
        g = torch.nn.functional.silu(y @ p[h + "feed_forward.w1.weight"].T) * (y @ p[h + "feed_forward.w3.weight"].T)
        x = x + g @ p[h + "feed_forward.w2.weight"].T
    out = p.get("output.weight", p["tok_embeddings.weight"])
    return rms(x, p["norm.weight"]) @ out.T


def write_case(name, style, V, ctx, E, layers, H, Hkv, F, eps, base, interleaved, untied, lengths):
    torch.manual_seed(zlib.crc32(name.encode()))
    rnd = lambda *shape: (torch.randn(*shape) * 0.3).double()  # noqa: E731
    p32 = gpt2_params(V, ctx, E, layers, F, rnd) if style == "gpt2" else llama_params(V, E, layers, H, Hkv, F, untied,
                                                                                       rnd)
    p32 = {k: v.float() for k, v in p32.items()}
    p = {k: v.double().requires_grad_() for k, v in p32.items()}
    seqs = [torch.randint(0, V, (n + 1,)) for n in lengths]  # each sequence and its next tokens
    ids, targets = torch.cat([s[:-1] for s in seqs]), torch.cat([s[1:] for s in seqs])
    logits = []
    for s in seqs:
        if style == "gpt2":
            logits.append(gpt2_forward(p, s[:-1], layers, H, eps))
        else:
            logits.append(llama_forward(p, s[:-1], layers, H, Hkv, eps, base, interleaved))
    logits = torch.cat(logits)
    loss = torch.nn.functional.cross_entropy(logits, targets)
    loss.backward()
    cu = torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(len(lengths))], dtype=torch.int64)
    tensors = dict(p32)
    tensors.update({"ids": ids, "targets": targets, "cu_seqlens": cu, "logits": logits.detach().float(),
                    "loss": loss.detach().float()})
    tensors.update({f"grad.{k}": v.grad.float() for k, v in p.items()})
    meta = {"style": style, "vocab_size": V, "context": ctx, "d_model": E, "num_layers": layers, "num_heads": H,
            "num_kv_heads": Hkv, "ffn_hidden": F, "norm_eps": repr(eps), "rope_base": repr(base),
            "rope_interleaved": int(interleaved), "untied": int(untied)}
    write_safetensors(os.path.join(OUT_DIR, f"lm_{name}.safetensors"), tensors, meta)
    print(f"lm_{name}: {len(p)} parameters, {ids.shape[0]} tokens, loss {loss.item():.6f}")


if __name__ == "__main__":
    for case, args in CASES.items():
        write_case(case, *args)
