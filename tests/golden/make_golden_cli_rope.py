#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_cli_op.c compares `attn op` with rotary
positions (--rope-base, --rope-layout, --rope-dim) against: tests/golden/cli_rope_<case>.safetensors.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_cli_rope.py

Torch 1.13 has no rotary call, so each case is composed as the reference code writes it
(make_golden_features.rope: GPT-NeoX's rotate_half, GPT-J's rotate_every_two, on the first
rotary_dim dims), in float64 on float32 inputs:
  - sdpa: q rotated at positions 0..Lq-1 and k at 0..Lk-1, then make_golden_features.attention
    (grouped-query, causal top-left, a window bottom-right aligned);
  - sdpa on packed sequences: each sequence's q and k rotated from position 0, FlashAttention's
    causal mask bottom-right in each sequence (cu_seqlens_q, cu_seqlens_k I64 in the file);
  - mha: make_golden_mha_gqa's layer with each head's q and k rotated after their projections,
    positions 0..L-1 and 0..S-1 (attn_mha_opts.rope's).
A file holds the inputs (q, k, v; mha: q, k, v under attn op's names and the parameters), out,
grad_out and grad.<input> (grad.<parameter>): the gradients of sum(out * grad_out). Metadata: the
case's options as attn op takes them. Deterministic: torch.manual_seed(crc32(name)).
"""
import os
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_features import attention, rope  # noqa: E402
from safetensors_writer import write_safetensors  # noqa: E402

OUT_DIR = os.path.join("tests", "golden")


def positions(n):
    return torch.arange(n, dtype=torch.int64)


def write(name, tensors, grads, out, grad_out, meta):
    out_t = {n: t.float() for n, t in tensors.items()}
    out_t.update({"out": out.float(), "grad_out": grad_out.float()})
    out_t.update({f"grad.{n}": t.grad.float() for n, t in grads.items()})
    write_safetensors(os.path.join(OUT_DIR, f"cli_rope_{name}.safetensors"), out_t, meta)


# name: B, H, H_kv, Lq, Lk, D, rotary_dim, base, layout, causal, window (or None), 3-D inputs
SDPA = {
    "sdpa_halves": (2, 4, 2, 5, 7, 8, 8, 10000.0, "halves", False, None, False),
    "sdpa_interleaved_partial": (2, 2, 2, 6, 6, 12, 8, 500.0, "interleaved", True, None, False),
    "sdpa_3d_window": (2, 1, 1, 7, 9, 8, 4, 10000.0, "halves", False, (2, 1), True),
}


def write_sdpa(name, B, H, Hkv, Lq, Lk, D, rot, base, layout, causal, window, three_d):
    torch.manual_seed(zlib.crc32(name.encode()))
    q = torch.randn(B, H, Lq, D).double().requires_grad_()
    k = torch.randn(B, Hkv, Lk, D).double().requires_grad_()
    v = torch.randn(B, Hkv, Lk, D).double().requires_grad_()
    qr, kr = rope(q, positions(Lq), 2, rot, base, layout), rope(k, positions(Lk), 2, rot, base, layout)
    out = attention(qr, kr, v, Hkv, window, causal, 0.0, None)
    grad_out = torch.randn(out.shape, dtype=torch.float64)
    (out * grad_out).sum().backward()
    squeeze = (lambda t: t[:, 0]) if three_d else (lambda t: t)
    tensors = {"q": squeeze(q.detach()), "k": squeeze(k.detach()), "v": squeeze(v.detach())}

    class Grad:  # the gradients in the file's layout
        def __init__(self, t):
            self.grad = squeeze(t.grad)
    meta = {"rope_base": base, "rope_layout": layout, "rope_dim": rot, "causal": int(causal),
            "window": f"{window[0]},{window[1]}" if window else "none", "enable_gqa": int(Hkv != H)}
    write(name, tensors, {n: Grad(t) for n, t in (("q", q), ("k", k), ("v", v))}, squeeze(out), squeeze(grad_out),
          meta)


def write_packed(name="sdpa_packed"):
    """Three sequences (q lengths 3, 5, 2; k 4, 5, 2), H 2 over H_kv 1, causal bottom-right."""
    torch.manual_seed(zlib.crc32(name.encode()))
    lq, lk, H, Hkv, D, rot, base, layout = [3, 5, 2], [4, 5, 2], 2, 1, 8, 8, 10000.0, "halves"
    q = torch.randn(sum(lq), H, D).double().requires_grad_()
    k = torch.randn(sum(lk), Hkv, D).double().requires_grad_()
    v = torch.randn(sum(lk), Hkv, D).double().requires_grad_()
    outs, at_q, at_k = [], 0, 0
    for nq, nk in zip(lq, lk):
        qs = rope(q[at_q:at_q + nq].transpose(0, 1)[None], positions(nq), 2, rot, base, layout)
        ks = rope(k[at_k:at_k + nk].transpose(0, 1)[None], positions(nk), 2, rot, base, layout)
        vs = v[at_k:at_k + nk].transpose(0, 1)[None]
        o = attention(qs, ks, vs, Hkv, (-1, 0), False, 0.0, None)  # bottom-right causal
        outs.append(o[0].transpose(0, 1))
        at_q, at_k = at_q + nq, at_k + nk
    out = torch.cat(outs)
    grad_out = torch.randn(out.shape, dtype=torch.float64)
    (out * grad_out).sum().backward()
    cu = lambda n: torch.tensor([0] + list(torch.tensor(n).cumsum(0)), dtype=torch.int64)  # noqa: E731
    tensors = {"q": q.detach(), "k": k.detach(), "v": v.detach()}
    out_t = {n: t.float() for n, t in tensors.items()}
    out_t.update({"cu_seqlens_q": cu(lq), "cu_seqlens_k": cu(lk), "out": out.float(), "grad_out": grad_out.float(),
                  "grad.q": q.grad.float(), "grad.k": k.grad.float(), "grad.v": v.grad.float()})
    write_safetensors(os.path.join(OUT_DIR, f"cli_rope_{name}.safetensors"), out_t,
                      {"rope_base": base, "rope_layout": layout, "rope_dim": rot, "causal": 1, "enable_gqa": 1})


def write_mha(name="mha_gqa"):
    """attn op mha --batch-first --num-heads 4: B 2, L 5, S 7, E 16, H_kv 2, rotated halves, base 1000."""
    torch.manual_seed(zlib.crc32(name.encode()))
    B, L, S, E, H, Hkv, base, layout = 2, 5, 7, 16, 4, 2, 1000.0, "halves"
    hd = E // H
    Ekv = Hkv * hd
    x = {"q": torch.randn(B, L, E), "k": torch.randn(B, S, E), "v": torch.randn(B, S, E)}
    p = {"q_proj_weight": torch.randn(E, E) * 0.3, "k_proj_weight": torch.randn(Ekv, E) * 0.3,
         "v_proj_weight": torch.randn(Ekv, E) * 0.3, "in_proj_bias": torch.randn(E + 2 * Ekv) * 0.2,
         "out_proj.weight": torch.randn(E, E) * 0.3, "out_proj.bias": torch.randn(E) * 0.2}
    x64 = {n: t.double().requires_grad_() for n, t in x.items()}
    p64 = {n: t.double().requires_grad_() for n, t in p.items()}
    b = p64["in_proj_bias"]
    q = (x64["q"] @ p64["q_proj_weight"].T + b[:E]).reshape(B, L, H, hd).transpose(1, 2)
    k = (x64["k"] @ p64["k_proj_weight"].T + b[E:E + Ekv]).reshape(B, S, Hkv, hd).transpose(1, 2)
    v = (x64["v"] @ p64["v_proj_weight"].T + b[E + Ekv:]).reshape(B, S, Hkv, hd).transpose(1, 2)
    q, k = rope(q, positions(L), 2, hd, base, layout), rope(k, positions(S), 2, hd, base, layout)
    o = attention(q, k, v, Hkv, None, False, 0.0, None).transpose(1, 2).reshape(B, L, E)
    out = o @ p64["out_proj.weight"].T + p64["out_proj.bias"]
    grad_out = torch.randn(out.shape, dtype=torch.float64)
    (out * grad_out).sum().backward()
    tensors = dict(x)
    tensors.update(p)
    grads = dict(x64)
    grads.update(p64)
    write(name, tensors, grads, out, grad_out, {"rope_base": base, "rope_layout": layout, "num_heads": H,
                                               "num_kv_heads": Hkv})


def main():
    torch.set_num_threads(1)
    for name, case in SDPA.items():
        write_sdpa(name, *case)
    write_packed()
    write_mha()
    print(f"wrote {len(SDPA) + 2} cli_rope_*.safetensors files to {OUT_DIR}")


if __name__ == "__main__":
    main()
