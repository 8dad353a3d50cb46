#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_attention_features.c compares attn_sdpa's
attention features against: tests/golden/feat_<case>.safetensors, one per case.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_features.py

Torch 1.13 has none of these features as a call, so each is composed as the documents define
it, in float64 on float32 inputs (the result rounded to float32: the golden carries no float32
error of its own):
  - grouped-query attention: k and v repeat_interleave'd over the query heads, as PyTorch's
    enable_gqa documents (query head h uses key/value head h // (H // H_kv));
  - the local window: FlashAttention's window_size (left, right), bottom-right aligned: query i
    sees keys j with i + Lk - Lq - left <= j <= i + Lk - Lq + right (-1: unbounded), as an
    explicit bool mask;
  - ALiBi: the bias -slope_h |i + Lk - Lq - j| added to the scaled (capped) scores, slopes (H) as
    the paper's code makes them (get_slopes) or (B, H) given;
  - soft-capping: scores softcap * tanh(scores / softcap) before the bias and the masks;
  - causal: top-left (torch.ones(Lq, Lk).tril()), as F.scaled_dot_product_attention's is_causal.
A file holds q, k, v (F32), alibi_slopes (F32, when the case has ALiBi), out, grad_out and
grad.q, grad.k, grad.v (the gradients of sum(out * grad_out)); the case's options are in its
metadata (heads_kv, window_left, window_right, causal, softcap, alibi) and mirrored in the C
test's table. Every row keeps a visible key.

rope_*: rotary position embeddings in the two layouts as their reference code writes them, in
float64: GPT-NeoX's (inv_freq = 1 / base^(arange(0, rot, 2) / rot), cos and sin of
cat(freqs, freqs), x * cos + rotate_half(x) * sin) and GPT-J's (cos and sin repeated per pair,
x * cos + rotate_every_two(x) * sin), on the first rotary_dim dims. A file holds x, positions (I64),
out, grad_out, grad.x; metadata: layout (halves, interleaved), rotary_dim, position_dim, base.
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


def get_slopes(n):
    """ALiBi's slopes as the paper's code (ofirpress/attention_with_linear_biases) makes them."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + get_slopes(2 * closest)[0::2][:n - closest]


def attention(q, k, v, heads_kv, window, causal, softcap, slopes, blocked=None):
    """blocked: a bool mask broadcastable to (B, H, Lq, Lk), true = not allowed (the MHA's masks)."""
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    k = k.repeat_interleave(H // heads_kv, dim=1)
    v = v.repeat_interleave(H // heads_kv, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(Lq, dtype=torch.float64)[:, None]
    j = torch.arange(Lk, dtype=torch.float64)[None, :]
    if slopes is not None:
        sl = slopes.double().reshape(-1 if slopes.dim() == 2 else 1, H, 1, 1)
        s = s - sl * (i + Lk - Lq - j).abs()
    keep = torch.ones(Lq, Lk, dtype=torch.bool)
    if causal:
        keep &= torch.ones(Lq, Lk, dtype=torch.bool).tril()
    if window is not None:
        left, right = window
        if left >= 0:
            keep &= j >= i + Lk - Lq - left
        if right >= 0:
            keep &= j <= i + Lk - Lq + right
    if blocked is not None:
        keep = keep & ~blocked
    assert keep.any(dim=-1).all(), "every row keeps a visible key"
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


# name: B, H, H_kv, Lq, Lk, D, Dv, window (or None), causal, softcap, alibi (None, "paper", "BH")
CASES = {
    "gqa": (2, 6, 2, 5, 7, 8, 6, None, False, 0.0, None),
    "mqa_causal": (1, 4, 1, 6, 6, 8, 8, None, True, 0.0, None),
    "window": (2, 3, 3, 6, 9, 8, 6, (2, 1), False, 0.0, None),
    "window_left_only": (1, 2, 2, 7, 4, 8, 6, (1, -1), False, 0.0, None),
    "window_causal": (1, 2, 2, 8, 8, 8, 8, (3, 0), True, 0.0, None),
    "alibi": (2, 4, 4, 5, 7, 8, 6, None, False, 0.0, "paper"),
    "alibi_bh": (2, 3, 3, 5, 7, 8, 6, None, True, 0.0, "BH"),
    "softcap": (2, 3, 3, 5, 7, 8, 6, None, False, 1.5, None),
    "all": (2, 4, 2, 7, 9, 8, 6, (3, 2), False, 2.0, "paper"),
}


def write_case(name, B, H, Hkv, Lq, Lk, D, Dv, window, causal, softcap, alibi):
    torch.manual_seed(zlib.crc32(name.encode()))
    q = (torch.randn(B, H, Lq, D) * 1.5).double().requires_grad_()
    k = (torch.randn(B, Hkv, Lk, D) * 1.5).double().requires_grad_()
    v = torch.randn(B, Hkv, Lk, Dv).double().requires_grad_()
    slopes = None
    if alibi == "paper":
        slopes = torch.tensor(get_slopes(H), dtype=torch.float32)
    elif alibi == "BH":
        slopes = torch.rand(B, H) * 0.5
    out = attention(q, k, v, Hkv, window, causal, softcap, slopes)
    grad_out = torch.randn(out.shape, dtype=torch.float64)
    (out * grad_out).sum().backward()
    assert torch.isfinite(out).all()
    tensors = {"q": q.float(), "k": k.float(), "v": v.float()}
    if slopes is not None:
        tensors["alibi_slopes"] = slopes.float()
    tensors.update({"out": out.float(), "grad_out": grad_out.float(), "grad.q": q.grad.float(),
                    "grad.k": k.grad.float(), "grad.v": v.grad.float()})
    meta = {"heads_kv": Hkv, "causal": int(causal), "softcap": softcap, "alibi": alibi or "none",
            "window_left": window[0] if window else "none", "window_right": window[1] if window else "none"}
    write_safetensors(os.path.join(OUT_DIR, f"feat_{name}.safetensors"), tensors, meta)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def rope(x, positions, position_dim, rot, base, layout):
    """x (..., d), positions along position_dim; float64."""
    inv_freq = 1.0 / base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    freqs = torch.outer(positions.double(), inv_freq)                      # (n, rot / 2)
    if layout == "halves":
        emb = torch.cat((freqs, freqs), dim=-1)                             # (n, rot)
    else:
        emb = freqs.repeat_interleave(2, dim=-1)
    shape = [1] * x.dim()
    shape[position_dim], shape[-1] = emb.shape[0], rot
    cos, sin = emb.cos().reshape(shape), emb.sin().reshape(shape)
    xr, rest = x[..., :rot], x[..., rot:]
    turned = rotate_half(xr) if layout == "halves" else rotate_every_two(xr)
    return torch.cat((xr * cos + turned * sin, rest), dim=-1)


# name: x shape, position_dim, rotary_dim, base, layout, positions (None: 0, 1, ...)
ROPE_CASES = {
    "rope_neox": ((2, 3, 7, 8), 2, 8, 10000.0, "halves", None),
    "rope_gptj": ((2, 7, 3, 8), 1, 8, 10000.0, "interleaved", None),
    "rope_partial": ((2, 3, 6, 12), 2, 8, 500.0, "halves", None),
    "rope_packed": ((9, 2, 8), 0, 8, 10000.0, "interleaved", [0, 1, 2, 3, 0, 1, 0, 1, 2]),
    "rope_far": ((1, 2, 4, 16), 2, 16, 10000.0, "halves", [5000, 9999, 30000, 123456]),
}


def write_rope_case(name, shape, position_dim, rot, base, layout, positions):
    torch.manual_seed(zlib.crc32(name.encode()))
    x = torch.randn(*shape).double().requires_grad_()
    pos = torch.tensor(positions if positions is not None else list(range(shape[position_dim])), dtype=torch.int64)
    out = rope(x, pos, position_dim, rot, base, layout)
    grad_out = torch.randn(out.shape, dtype=torch.float64)
    (out * grad_out).sum().backward()
    write_safetensors(os.path.join(OUT_DIR, f"feat_{name}.safetensors"),
                      {"x": x.float(), "positions": pos, "out": out.float(), "grad_out": grad_out.float(),
                       "grad.x": x.grad.float()},
                      {"layout": layout, "rotary_dim": rot, "position_dim": position_dim, "base": base})


def main():
    torch.set_num_threads(1)
    for name, case in CASES.items():
        write_case(name, *case)
    for name, case in ROPE_CASES.items():
        write_rope_case(name, *case)
    print(f"wrote {len(CASES) + len(ROPE_CASES)} feat_*.safetensors files to {OUT_DIR}")


if __name__ == "__main__":
    main()
