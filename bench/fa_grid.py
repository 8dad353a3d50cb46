#!/usr/bin/python3
"""`attn op sdpa` on FlashAttention-2's own test grid, held to its criterion.

FlashAttention-2's tests (tests/test_flash_attn.py of Dao-AILab/flash-attention) run each kernel
over head dims 32 to 256 (59, 111 and 224 among them) and (seqlen_q, seqlen_k) pairs such as
(113, 203), (512, 256), (1023, 1024), (239, 1) and (799, 3), with causal and local windows
aligned to the bottom right, ALiBi, soft-capping, MQA and GQA, and packed sequences with padding,
and require of every output and gradient

    max |kernel - reference| <= 2 max |plain - reference|

where reference is the attention composed in a higher precision and plain the same composition in
the kernel's own. Here the kernel is attn's (float32), the reference PyTorch's composition in
float64 and plain the same composition in float32, on the same inputs (torch.manual_seed per case).

    /usr/bin/python3 bench/fa_grid.py [ATTN_BIN] [--cases N] [--seeds N]   (default build/attn, all cases)

--seeds N reruns each case that misses the criterion with N other seeds, and beside attn runs a
second plain float32 composition (PyTorch's, the head dim summed in reverse order): how often an
honest float32 implementation misses the same criterion on that shape.

Needs Debian's python3-torch (1.13: it imports only under /usr/bin/python3). Prints one line per
case and the count that meet the criterion; exits 1 when one does not. Not run by the tests (the
suite's own harness is tests/test_attention_differential.c, which needs no torch).
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import torch

D_VALUES = [32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256]
SEQLENS = [(113, 203), (128, 217), (113, 211), (108, 256), (256, 512), (512, 256), (1023, 1024), (1024, 1023),
           (239, 1), (1, 239), (3, 799), (799, 3), (97, 97), (257, 257)]
# what each of a head dim's five cases adds (FlashAttention's parametrisations, one at a time)
FEATURES = ["plain", "causal", "local", "softcap_alibi", "varlen"]


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        dtype = {torch.float32: "F32", torch.int64: "I64"}[t.dtype]
        data = t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(e["shape"])
    return out


def attention(q, k, v, causal, window, softcap, slopes):
    """q (B, H, Lq, d), k and v (B, Hkv, Lk, d): FlashAttention's masks, bottom-right aligned."""
    B, H, Lq, d = q.shape
    Lk = k.shape[2]
    k = k.repeat_interleave(H // k.shape[1], dim=1)
    v = v.repeat_interleave(H // v.shape[1], dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(Lq)[:, None]
    j = torch.arange(Lk)[None, :]
    if slopes is not None:
        s = s - slopes.to(s.dtype)[None, :, None, None] * (i + Lk - Lq - j).abs().to(s.dtype)
    keep = torch.ones(Lq, Lk, dtype=torch.bool)
    left, right = window if window else (-1, -1)
    if causal:
        right = 0 if right < 0 else min(right, 0)
    if left >= 0:
        keep &= j >= i + Lk - Lq - left
    if right >= 0:
        keep &= j <= i + Lk - Lq + right
    s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row that sees no key: 0, as attn gives it
    return p @ v


def grads(fn, inputs, dout):
    x = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*x)
    out.backward(dout)
    return [out.detach()] + [t.grad.detach() for t in x]


def case_list():
    cases = []
    for n, d in enumerate(D_VALUES):
        for f, feature in enumerate(FEATURES):
            lq, lk = SEQLENS[(5 * n + f) % len(SEQLENS)]
            mha = ["mha", "gqa", "mqa"][(n + f) % 3]
            cases.append((d, lq, lk, feature, mha))
    return cases


def run_case(attn_bin, work, d, lq, lk, feature, mha, seed=None):
    torch.manual_seed(1000 * d + 7 * lq + lk + len(feature) if seed is None else seed)
    H, Hkv = 4, {"mha": 4, "gqa": 2, "mqa": 1}[mha]
    causal = feature == "causal"
    window = None
    if feature == "local":
        window = (int(torch.randint(0, lk, (1,))), int(torch.randint(0, lk, (1,))))
    softcap = 50.0 if feature == "softcap_alibi" else 0.0
    slopes = torch.rand(H) * 0.3 if feature == "softcap_alibi" else None
    args = ["--enable-gqa"] if Hkv != H else []
    if causal:
        args += ["--window", "-1,0"]  # FlashAttention's causal: bottom-right (attn op's --causal is PyTorch's)
    if window:
        args += ["--window", f"{window[0]},{window[1]}"]
    if softcap:
        args += ["--softcap", str(softcap)]
    if feature == "varlen":  # packed: two sequences, the second padded shorter (FlashAttention's random padding)
        lens_q = [lq, max(1, lq // 2)]
        lens_k = [lk, max(1, lk // 3)]
        q = torch.randn(sum(lens_q), H, d)
        k = torch.randn(sum(lens_k), Hkv, d)
        v = torch.randn(sum(lens_k), Hkv, d)
        dout = torch.randn(sum(lens_q), H, d)
        causal = True
        args += ["--causal"]  # attn op's packed --causal is FlashAttention's, bottom-right in each sequence

        def composed(q, k, v):
            outs, aq, ak = [], 0, 0
            for nq, nk in zip(lens_q, lens_k):
                o = attention(q[aq:aq + nq].transpose(0, 1)[None], k[ak:ak + nk].transpose(0, 1)[None],
                              v[ak:ak + nk].transpose(0, 1)[None], True, None, 0.0, None)
                outs.append(o[0].transpose(0, 1))
                aq, ak = aq + nq, ak + nk
            return torch.cat(outs)
        cu = lambda lens: torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))])  # noqa: E731
        extra = {"cu_seqlens_q": cu(lens_q), "cu_seqlens_k": cu(lens_k)}
    else:
        q, k, v = torch.randn(1, H, lq, d), torch.randn(1, Hkv, lk, d), torch.randn(1, Hkv, lk, d)
        dout = torch.randn(1, H, lq, d)

        def composed(q, k, v):
            return attention(q, k, v, causal, window, softcap, slopes)
        extra = {"alibi_slopes": slopes} if slopes is not None else {}
    ref = grads(composed, [t.double() for t in (q, k, v)], dout.double())
    plain = grads(composed, [q, k, v], dout)
    write_safetensors(f"{work}/in.safetensors", dict(q=q, k=k, v=v, grad_out=dout, **extra))
    subprocess.run([attn_bin, "op", "sdpa", "--in", f"{work}/in.safetensors", "--out", f"{work}/out.safetensors",
                    "--threads", "2"] + args, check=True)
    got = read_safetensors(f"{work}/out.safetensors")
    ours = [got["out"], got["dq"], got["dk"], got["dv"]]
    flip = torch.arange(d - 1, -1, -1)  # the same composition, the head dim summed in reverse
    reverse = [t[..., flip] for t in grads(composed, [q[..., flip], k[..., flip], v[..., flip]], dout[..., flip])]
    return error_ratios(ours, plain, ref), error_ratios(reverse, plain, ref)


def error_ratios(tensors, plain, ref):
    ratios = []
    for o, p, r in zip(tensors, plain, ref):
        e, ep = (o.double() - r).abs().max().item(), (p.double() - r).abs().max().item()
        ratios.append(e / ep if ep > 0 else (0.0 if e == 0 else math.inf))
    return ratios


def seed_statistics(attn_bin, work, case, seeds):
    """Over `seeds` draws of one case: attn's ratios and the reversed-order float32's, per tensor."""
    runs = [run_case(attn_bin, work, *case, seed=777 + s) for s in range(seeds)]
    for who, at in (("attn", 0), ("float32 reversed", 1)):
        cells = []
        for t, name in enumerate(["out", "dq", "dk", "dv"]):
            col = sorted(r[at][t] for r in runs)
            cells.append(f"{name} median {col[len(col) // 2]:.2f} max {col[-1]:.2f} over 2: {sum(c > 2 for c in col)}")
        print(f"    {seeds} seeds, {who:16s}: " + "; ".join(cells), flush=True)


def main():
    argv = sys.argv[1:]
    limit = None
    if "--cases" in argv:
        at = argv.index("--cases")
        limit = int(argv[at + 1])
        del argv[at:at + 2]
    seeds = 0
    if "--seeds" in argv:
        at = argv.index("--seeds")
        seeds = int(argv[at + 1])
        del argv[at:at + 2]
    attn_bin = argv[0] if argv else "build/attn"
    torch.set_num_threads(2)
    cases = case_list()[:limit]
    passed = 0
    with tempfile.TemporaryDirectory() as work:
        for d, lq, lk, feature, mha in cases:
            ratios, _ = run_case(attn_bin, work, d, lq, lk, feature, mha)
            ok = all(r <= 2.0 for r in ratios)
            passed += ok
            print(f"{'ok ' if ok else 'BAD'} d {d:3d} Lq {lq:4d} Lk {lk:4d} {feature:13s} {mha}: error / plain "
                  f"float32's: out {ratios[0]:.2f} dq {ratios[1]:.2f} dk {ratios[2]:.2f} dv {ratios[3]:.2f}",
                  flush=True)
            if not ok and seeds:
                seed_statistics(attn_bin, work, (d, lq, lk, feature, mha), seeds)
    print(f"fa_grid: {passed} of {len(cases)} cases within 2x plain float32's error (FlashAttention's criterion)")
    sys.exit(0 if passed == len(cases) else 1)


if __name__ == "__main__":
    main()
