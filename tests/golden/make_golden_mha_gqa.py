#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_mha_gqa.c compares attn_mha_forward with
fewer key/value heads than query heads (attn_mha_init_gqa) against, and tests/test_cli_op.c
`attn op mha` (with --window, --alibi and --softcap on the mha_gqa_feat_* cases):
tests/golden/mha_gqa_<case>.safetensors, one per case.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_mha_gqa.py

Torch 1.13's nn.MultiheadAttention has one count of heads, so the layer is composed as
nn.MultiheadAttention computes it (batch first, dropout 0), with the key and value projections
num_kv_heads * head_dim wide and each key/value head shared by H / H_kv query heads
(repeat_interleave over the heads, as PyTorch's enable_gqa documents):
    q = query Wq^T + bq,  k = key Wk^T + bk,  v = value Wv^T + bv
    heads: q (B, H, L, hd), k and v (B, H_kv, S, hd) repeat_interleave'd to H heads
    o = softmax(q k^T / sqrt(hd) + mask) v,  out = merge(o) Wo^T + bo
the feat_* cases with the attention features of make_golden_features.attention on the heads
(FlashAttention's window, bottom-right aligned; ALiBi with the paper's slopes; soft-capping)
in float64 on float32 inputs and parameters (the result rounded to float32: the golden carries no
float32 error of its own). A file holds
  query (and key, value unless metadata self_attention = "1": then the one tensor `query` is
  passed as query, key and value), the parameters under the layer's state_dict names
  (q_proj_weight (E, E), k_proj_weight (Ekv, kdim), v_proj_weight (Ekv, vdim), in_proj_bias
  (E + 2 Ekv) unless bias = "0", out_proj.weight, out_proj.bias), the masks as
  nn.MultiheadAttention takes them (key_padding_mask BOOL (B, S), true = padding; attn_mask BOOL
  (L, S), true = NOT allowed), out, grad_out, grad.<input> and grad.<parameter> (the gradients of
  sum(out * grad_out)). Metadata: num_heads, num_kv_heads, kdim, vdim, bias, self_attention, and
  on the feat_* cases window_left, window_right, softcap, alibi.
Every parameter is randomised (biases too) so that each one matters; every query row keeps a
visible key. Deterministic: torch.manual_seed(crc32(name)).
"""
import math
import os
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_features import attention, get_slopes  # noqa: E402
from safetensors_writer import write_safetensors  # noqa: E402

OUT_DIR = os.path.join("tests", "golden")
E = 16

# name: B, L, S, H, H_kv, kdim, vdim, bias, self-attention, key padding, attn_mask,
#       then the features: window (left, right) or None, softcap (0: none), ALiBi (the paper's slopes)
CASES = {
    "self_kpm": (2, 6, 6, 4, 2, E, E, True, True, True, False, None, 0.0, False),
    "mqa_cross_mask": (2, 5, 7, 4, 1, 12, 10, True, False, False, True, None, 0.0, False),
    "nobias_kpm_mask": (2, 6, 6, 8, 2, E, E, False, False, True, True, None, 0.0, False),
    "feat_window_alibi_kpm": (2, 6, 6, 4, 2, E, E, True, True, True, False, (2, 1), 0.0, True),
    "feat_softcap_cross_mask": (2, 5, 7, 4, 4, 12, 10, True, False, False, True, None, 2.5, False),
    "feat_all_mqa": (2, 7, 9, 4, 1, E, E, True, False, True, False, (3, 2), 2.0, True),
}


def forward(query, key, value, p, H, Hkv, kpm, mask, window, softcap, slopes):
    B, L, _ = query.shape
    S, hd = key.shape[1], E // H
    Ekv = Hkv * hd
    b = p.get("in_proj_bias")
    q = query @ p["q_proj_weight"].T + (b[:E] if b is not None else 0)
    k = key @ p["k_proj_weight"].T + (b[E:E + Ekv] if b is not None else 0)
    v = value @ p["v_proj_weight"].T + (b[E + Ekv:] if b is not None else 0)
    q = q.reshape(B, L, H, hd).transpose(1, 2)
    k = k.reshape(B, S, Hkv, hd).transpose(1, 2)
    v = v.reshape(B, S, Hkv, hd).transpose(1, 2)
    blocked = torch.zeros(B, 1, L, S, dtype=torch.bool)
    if kpm is not None:
        blocked |= kpm[:, None, None, :]
    if mask is not None:
        blocked |= mask[None, None]
    o = attention(q, k, v, Hkv, window, False, softcap, slopes, blocked)
    o = o.transpose(1, 2).reshape(B, L, E)
    return o @ p["out_proj.weight"].T + p["out_proj.bias"]


def write_case(name, B, L, S, H, Hkv, kdim, vdim, bias, self_attn, with_kpm, with_mask, window, softcap, alibi):
    torch.manual_seed(zlib.crc32(name.encode()))
    Ekv = Hkv * (E // H)
    query = torch.randn(B, L, E)
    key = query if self_attn else torch.randn(B, S, kdim)
    value = query if self_attn else torch.randn(B, S, vdim)
    params = {"q_proj_weight": torch.randn(E, E) * 0.3, "k_proj_weight": torch.randn(Ekv, kdim) * 0.3,
              "v_proj_weight": torch.randn(Ekv, vdim) * 0.3}
    if bias:
        params["in_proj_bias"] = torch.randn(E + 2 * Ekv) * 0.2
    params["out_proj.weight"] = torch.randn(E, E) * 0.3
    params["out_proj.bias"] = torch.randn(E) * 0.2 if bias else torch.zeros(E)
    kpm = None
    if with_kpm:
        kpm = torch.zeros(B, S, dtype=torch.bool)
        kpm[1, S - 2:] = True
    mask = None
    if with_mask:
        mask = torch.rand(L, S) < 0.3
        mask[:, 0] = False
    inputs = {"query": query} if self_attn else {"query": query, "key": key, "value": value}
    x64 = {n: t.double().requires_grad_() for n, t in inputs.items()}
    p64 = {n: t.double().requires_grad_() for n, t in params.items()}
    slopes = torch.tensor(get_slopes(H), dtype=torch.float32) if alibi else None
    out = forward(x64["query"], x64.get("key", x64["query"]), x64.get("value", x64["query"]), p64, H, Hkv, kpm, mask,
                  window, softcap, slopes)
    grad_out = torch.randn(out.shape, dtype=torch.float64)
    (out * grad_out).sum().backward()
    assert torch.isfinite(out).all()
    tensors = dict(inputs)
    tensors.update(params)
    if not bias:
        del tensors["out_proj.bias"]
    if kpm is not None:
        tensors["key_padding_mask"] = kpm
    if mask is not None:
        tensors["attn_mask"] = mask
    tensors.update({"out": out.float(), "grad_out": grad_out.float()})
    tensors.update({f"grad.{n}": t.grad.float() for n, t in x64.items()})
    tensors.update({f"grad.{n}": t.grad.float() for n, t in p64.items() if bias or n != "out_proj.bias"})
    meta = {"num_heads": H, "num_kv_heads": Hkv, "kdim": kdim, "vdim": vdim, "bias": int(bias),
            "self_attention": int(self_attn)}
    if name.startswith("feat_"):
        meta.update({"softcap": softcap, "alibi": "paper" if alibi else "none",
                     "window_left": window[0] if window else "none", "window_right": window[1] if window else "none"})
    write_safetensors(os.path.join(OUT_DIR, f"mha_gqa_{name}.safetensors"), tensors, meta)


def main():
    torch.set_num_threads(1)
    for name, case in CASES.items():
        write_case(name, *case)
    print(f"wrote {len(CASES)} mha_gqa_*.safetensors files to {OUT_DIR}")


if __name__ == "__main__":
    main()
