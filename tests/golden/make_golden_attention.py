#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_golden_attention.c compares libattn's
attention against: tests/golden/attn_<case>.safetensors, one per case.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_attention.py

Two families of cases:

sdpa_*  Scaled dot-product attention written out as the tutorials do (no F.scaled_dot_product_
        attention in torch 1.13): scores = q @ k^T / sqrt(d) (or * scale), masked_fill(-inf),
        softmax, @ v. Default shape B=2, H=3, Lq=5, Lk=7, d=8, dv=6. A file holds
          q, k, v (F32), out, weights (the softmax, (B, H, Lq, Lk)), grad_out,
          grad.q, grad.k, grad.v = d sum(out * grad_out) / d input,
        and the masks of the case, already in libattn's polarity (the C test passes them as is):
          attend_mask       BOOL (Lq, Lk), true = may attend (SDPA polarity)
          additive_mask     F32 (B, 1, 1, Lk), 0 or a value added to the scaled scores, -inf blocks
          valid_lens        I64 (B) or (B, Lq), D2L: keys j >= valid_len are masked
          key_padding_mask  BOOL (B, Lk), true = padding (PyTorch key_padding_mask polarity)
        Metadata: causal ("1" = top-left aligned tril mask), scale ("default" = 1/sqrt(d)).

mha_*   torch.nn.MultiheadAttention(E=16, H=4, batch_first=True, dropout=0) (cli_mha_*: the same,
        for `attn op mha`, with cross-attention inputs). A file holds
          query (and key, value unless metadata self_attention = "1": then the one tensor
          `query` is passed as query, key and value), the parameters under their state_dict
          names (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias, or
          q_proj_weight, k_proj_weight, v_proj_weight when kdim/vdim differ from E),
          out, weights (when need_weights = "1"; (B, Lq, Lk) when average_attn_weights = "1",
          else (B, H, Lq, Lk)), grad_out, grad.<input> and grad.<parameter>,
        and the masks exactly as given to torch, in PyTorch's polarity:
          key_padding_mask  BOOL (B, Lk), true = padding
          attn_mask         BOOL (L, S) or (B*H, L, S), true = NOT allowed (libattn's `blocked`
                            field), or F32 (L, S), added to the scores.
        Every parameter is randomised (biases too, which torch would zero) so that each one
        matters to the output.

Fully masked query rows are left out on purpose: torch 1.13 gives NaN there while libattn gives
0 by design (tests/test_attention.c checks that). Every case keeps >= 1 visible key per row, and
the script asserts the outputs are finite. With >= 1 visible key, D2L's -1e6 fill and -inf agree
exactly in float32 (exp(-1e6 - max) == 0), so valid_lens cases are comparable too.

Deterministic: torch.manual_seed(crc32(case name)) per case, one thread, float32.
"""
import math
import os
import zlib

import torch
import torch.nn as nn

OUT_DIR = os.path.join("tests", "golden")
NEG_INF = float("-inf")

# ---------------------------------------------------------------------------------------------
# safetensors writer (8-byte aligned JSON header padded with spaces, contiguous data offsets)
# ---------------------------------------------------------------------------------------------
from safetensors_writer import write_safetensors  # noqa: E402 (the script folder is on sys.path)


def rn(*shape):
    return torch.randn(tuple(shape), dtype=torch.float32)


def check_finite(name, *ts):
    for t in ts:
        assert t is None or torch.isfinite(t).all(), "%s: non-finite (a fully masked row?)" % name


# ---------------------------------------------------------------------------------------------
# SDPA: the tutorials' math
# ---------------------------------------------------------------------------------------------
def sdpa_math(q, k, v, scale=None, causal=False, attend_mask=None, additive_mask=None,
              valid_lens=None, key_padding_mask=None):
    """Returns (out, weights). Masks in libattn's polarity (see the module docstring)."""
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1)
    scores = scores * scale if scale is not None else scores / math.sqrt(d)
    lq, lk = scores.shape[-2:]
    if additive_mask is not None:
        scores = scores + additive_mask
    if causal:  # seed 002: torch.ones(Lq, Lk).tril() == 0 -> -inf (top-left aligned)
        scores = scores.masked_fill(torch.ones(lq, lk).tril() == 0, NEG_INF)
    if attend_mask is not None:  # seed 000: masked_fill(mask == 0, -inf)
        scores = scores.masked_fill(attend_mask == 0, NEG_INF)
    if key_padding_mask is not None:  # (B, Lk) -> (B, 1, 1, Lk), or (B, 1, Lk) for 3-D inputs
        kpm = key_padding_mask.view(key_padding_mask.shape[0], *([1] * (scores.dim() - 2)), lk)
        scores = scores.masked_fill(kpm, NEG_INF)
    if valid_lens is not None:
        # D2L masked_softmax: sequence_mask replaces keys j >= valid_len with -1e6
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(-1, lq)
        keep = torch.arange(lk)[None, None, :] < lens[:, :, None]          # (B, Lq, Lk)
        if scores.dim() == 4:
            keep = keep[:, None]
        scores = torch.where(keep, scores, torch.tensor(-1e6))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def sdpa_case(name, b=2, h=3, lq=5, lk=7, d=8, dv=6, scale=None, causal=False, attend=False,
              additive=False, lens=0, padding=False):
    """lens: 0 none, 1 valid_lens (B), 2 valid_lens (B, Lq). h=0: 3-D inputs (one head)."""
    torch.manual_seed(zlib.crc32(name.encode()))
    lead = (b, h) if h else (b,)
    q, k, v = rn(*lead, lq, d), rn(*lead, lk, d), rn(*lead, lk, dv)
    masks = {}
    if attend:
        m = torch.rand(lq, lk) < 0.6
        m[torch.arange(lq), torch.randint(0, lk, (lq,))] = True  # >= 1 key per row
        if not h:
            m[:, 0] = True  # key 0, which the additive mask keeps too
        masks["attend_mask"] = m
    if additive:  # 3-D inputs: one mask row per batch row and query, (B, Lq, Lk), as torch
        shape = (b, 1, 1, lk) if h else (b, lq, lk)  # broadcasts it against q @ k^T there
        m = rn(*shape)
        m[torch.rand(*shape) < 0.3] = NEG_INF
        m[..., 0] = 0.5  # key 0 stays visible for every row
        masks["additive_mask"] = m
    if lens == 1:
        masks["valid_lens"] = torch.randint(1, lk + 1, (b,), dtype=torch.int64)
    elif lens == 2:
        masks["valid_lens"] = torch.randint(1, lk + 1, (b, lq), dtype=torch.int64)
    if padding:
        n_valid = torch.randint(1, lk, (b,))
        n_valid[0] = lk  # one sequence without padding
        masks["key_padding_mask"] = torch.arange(lk)[None, :] >= n_valid[:, None]
    for t in (q, k, v):
        t.requires_grad_(True)
    out, weights = sdpa_math(q, k, v, scale=scale, causal=causal, **masks)
    grad_out = rn(*out.shape)
    out.backward(grad_out)
    check_finite(name, out, weights, q.grad, k.grad, v.grad)
    tensors = dict(q=q, k=k, v=v, **masks)
    tensors.update({"out": out, "weights": weights, "grad_out": grad_out,
                    "grad.q": q.grad, "grad.k": k.grad, "grad.v": v.grad})
    meta = {"kind": "sdpa", "causal": int(causal), "scale": "default" if scale is None else scale,
            "masks": "attend_mask true = may attend; key_padding_mask true = padding; "
                     "valid_lens D2L; additive_mask added to scaled scores"}
    write_safetensors(os.path.join(OUT_DIR, "attn_%s.safetensors" % name), tensors, meta)


def sdpa_cases():
    sdpa_case("sdpa_plain")
    sdpa_case("sdpa_3d", h=0)  # (B, L, D) inputs: one head
    sdpa_case("sdpa_3d_masks", h=0, attend=True, additive=True)
    sdpa_case("sdpa_causal", lk=5, causal=True)
    sdpa_case("sdpa_causal_q7k5", lq=7, lk=5, causal=True)
    sdpa_case("sdpa_causal_q5k7", lq=5, lk=7, causal=True)
    sdpa_case("sdpa_attend", attend=True)
    sdpa_case("sdpa_additive", additive=True)
    sdpa_case("sdpa_lens_batch", lens=1)
    sdpa_case("sdpa_lens_query", lens=2)
    sdpa_case("sdpa_key_padding", padding=True)
    sdpa_case("sdpa_scale", scale=0.3)


# ---------------------------------------------------------------------------------------------
# nn.MultiheadAttention
# ---------------------------------------------------------------------------------------------
E, HEADS = 16, 4


def mha_case(name, b=2, lq=6, lk=None, kdim=None, vdim=None, bias=True, key_padding=False,
             attn_mask=None, need_weights=False, average=True, prefix="attn_", unbatched=False):
    """lk None: self-attention (one tensor as query, key and value).
    key_padding: False, True (bool) or "float" (0, -inf or a negative value, added).
    attn_mask: None, "bool" (L, S), "bool3d" (B*H, L, S), "uint8" (L, S, deprecated in torch
    1.13, read as bool), "float" (L, S), "causal".
    unbatched: b = 1 and the batch dim left off, as nn.MultiheadAttention takes it: inputs (L, E),
    key_padding_mask (S), a bool3d mask (H, L, S)."""
    torch.manual_seed(zlib.crc32(name.encode()))
    mha = nn.MultiheadAttention(E, HEADS, dropout=0.0, bias=bias, kdim=kdim, vdim=vdim,
                                batch_first=True)
    with torch.no_grad():  # biases too (torch zeroes them), so every parameter matters
        for p_name, p in mha.named_parameters():
            if p.dim() == 1:
                p.copy_(0.2 * rn(*p.shape))
    self_attn = lk is None
    s = lq if self_attn else lk
    query = rn(b, lq, E)
    if self_attn:
        inputs = {"query": query}
        args = (query, query, query)
    else:
        inputs = {"query": query, "key": rn(b, s, kdim or E), "value": rn(b, s, vdim or E)}
        args = (inputs["query"], inputs["key"], inputs["value"])
    if unbatched:
        assert b == 1
        inputs = {k: t[0] for k, t in inputs.items()}
        args = tuple(inputs[k] for k in (("query",) * 3 if self_attn else ("query", "key", "value")))
    for t in inputs.values():
        t.requires_grad_(True)

    masks = {}
    if key_padding:
        n_valid = torch.randint(1, s, (b,))
        n_valid[0] = s
        masks["key_padding_mask"] = torch.arange(s)[None, :] >= n_valid[:, None]
        if key_padding == "float":  # added to the scores: -inf on padding, a soft bias elsewhere
            soft = -torch.rand(b, s)
            masks["key_padding_mask"] = torch.where(masks["key_padding_mask"],
                                                    torch.tensor(NEG_INF), soft)
        if unbatched:
            masks["key_padding_mask"] = masks["key_padding_mask"][0]
    if attn_mask in ("bool", "bool3d", "uint8"):
        shape = (b * HEADS, lq, s) if attn_mask == "bool3d" else (lq, s)
        m = torch.rand(*shape) < 0.4  # true = blocked
        m[..., 0] = False  # key 0 (never padding) stays visible: no fully masked row
        masks["attn_mask"] = m.to(torch.uint8) if attn_mask == "uint8" else m
    elif attn_mask == "float":
        m = rn(lq, s)
        m[torch.rand(lq, s) < 0.3] = NEG_INF
        m[:, 0] = 0.0
        masks["attn_mask"] = m
    elif attn_mask == "causal":
        masks["attn_mask"] = nn.Transformer.generate_square_subsequent_mask(lq)

    out, weights = mha(*args, key_padding_mask=masks.get("key_padding_mask"),
                       attn_mask=masks.get("attn_mask"), need_weights=need_weights,
                       average_attn_weights=average)
    grad_out = rn(*out.shape)
    out.backward(grad_out)
    check_finite(name, out, weights, *(t.grad for t in inputs.values()),
                 *(p.grad for p in mha.parameters()))

    tensors = dict(inputs)
    tensors.update(masks)
    tensors.update(mha.state_dict())
    tensors["out"] = out
    if need_weights:
        tensors["weights"] = weights
    tensors["grad_out"] = grad_out
    for k, t in inputs.items():
        tensors["grad." + k] = t.grad
    for p_name, p in mha.named_parameters():
        tensors["grad." + p_name] = p.grad
    meta = {"kind": "mha", "embed_dim": E, "num_heads": HEADS, "kdim": kdim or E,
            "vdim": vdim or E, "bias": int(bias), "self_attention": int(self_attn),
            "need_weights": int(need_weights), "average_attn_weights": int(average),
            "masks": "PyTorch polarity: key_padding_mask true = padding, bool attn_mask "
                     "true = blocked, float attn_mask added"}
    write_safetensors(os.path.join(OUT_DIR, "%s%s.safetensors" % (prefix, name)), tensors, meta)


def mha_cases():
    mha_case("mha_self_kpm", key_padding=True, need_weights=True, average=True)
    mha_case("mha_self_bool", attn_mask="bool")
    mha_case("mha_self_bool3d", attn_mask="bool3d", need_weights=True, average=False)
    mha_case("mha_self_float", attn_mask="float", key_padding=True, need_weights=True,
             average=False)
    mha_case("mha_self_causal", attn_mask="causal", need_weights=True, average=True)
    mha_case("mha_cross", lq=5, lk=9, key_padding=True, need_weights=True, average=True)
    mha_case("mha_kvdim", lq=5, lk=9, kdim=12, vdim=10, key_padding=True)
    mha_case("mha_nobias", bias=False, attn_mask="bool", key_padding=True, need_weights=True,
             average=False)
    mha_case("mha_unbatched", b=1, attn_mask="bool3d", key_padding=True, need_weights=True,
             average=False, unbatched=True)
    # For `attn op mha` (tests/test_cli_op.c): separate query, key, value; each mask exactly as
    # nn.MultiheadAttention takes it
    mha_case("mha_bool_kpm", lq=5, lk=9, attn_mask="bool", key_padding=True, need_weights=True,
             average=False, prefix="cli_")
    mha_case("mha_bool3d_kpm", b=3, lq=5, lk=9, attn_mask="bool3d", key_padding=True,
             need_weights=True, average=False, prefix="cli_")
    mha_case("mha_uint8", lq=5, lk=9, attn_mask="uint8", need_weights=True, prefix="cli_")
    mha_case("mha_float_kpm", lq=5, lk=9, key_padding="float", need_weights=True, prefix="cli_")
    mha_case("mha_float_bool_kpm", lq=5, lk=9, attn_mask="float", key_padding=True,
             need_weights=True, prefix="cli_")
    mha_case("mha_unbatched_float_kpm", b=1, lq=5, lk=9, key_padding="float", need_weights=True,
             prefix="cli_", unbatched=True)


def main():
    torch.set_num_threads(1)  # one summation order, whatever the machine
    os.makedirs(OUT_DIR, exist_ok=True)
    sdpa_cases()
    mha_cases()


if __name__ == "__main__":
    main()
