#!/usr/bin/python3
"""Writes llama2.c checkpoints and what PyTorch computes with them, for tests/test_lm_llama2c.c:
tests/golden/llama2c_<case>.bin and llama2c_<case>.safetensors.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_llama2c.py

The .bin files are laid out from the format's definition (llama2.c's export.py, legacy_export
for version 0 and version1_export for 1: header, then the float32 tensors in that order,
little-endian), not by attn. The model is llama2.c's: RMSNorm eps 1e-5, rotary pairs (2i, 2i+1)
of base 10000 (Meta's complex form), grouped-query attention, SwiGLU, tied or untied output;
make_golden_lm.py's composition, in float64 on the float32 weights. Each .safetensors holds ids
(one sequence) and logits (n, V): the model's next-token logits at every position.
Deterministic: torch.manual_seed(crc32(name)).
"""
import os
import struct
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_lm import llama_forward, llama_params  # noqa: E402
from safetensors_writer import write_safetensors  # noqa: E402

OUT_DIR = os.path.join("tests", "golden")

CASES = {
    # name: version, V, seq_len, dim, layers, heads, kv heads, hidden, untied, tokens
    "v0_gqa_untied": (0, 43, 20, 32, 2, 4, 2, 96, True, 17),
    "v1_tied": (1, 29, 12, 16, 3, 2, 2, 48, False, 12),
}


def floats(t):
    t = t.detach().float().contiguous().view(-1)
    return struct.pack(f"<{t.numel()}f", *t.tolist())


def write_bin(path, version, p, V, T, E, L, H, Hkv, F, untied):
    ints = (E, F, L, H, Hkv, V, T)
    with open(path, "wb") as f:
        if version == 0:
            f.write(struct.pack("<7i", *ints[:5], -V if untied else V, T))
            order = ["tok_embeddings.weight"]
            for kind in ("attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
                         "ffn_norm", "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"):
                order += [f"layers.{i}.{kind}.weight" for i in range(L)]
            order.append("norm.weight")
            for name in order:
                f.write(floats(p[name]))
            d = E // H  # freqs_cos and freqs_sin of model.py's precompute_freqs_cis, (T, d/2) each
            inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2)[: d // 2].float() / d))
            ang = torch.outer(torch.arange(T).float(), inv)
            f.write(floats(torch.cos(ang)))
            f.write(floats(torch.sin(ang)))
        else:
            head = struct.pack("<Ii", 0x616B3432, 1) + struct.pack("<7i", *ints) + struct.pack("B", int(not untied))
            f.write(head + b"\0" * (256 - len(head)))
            order = [f"layers.{i}.attention_norm.weight" for i in range(L)]
            order += [f"layers.{i}.ffn_norm.weight" for i in range(L)]
            order += ["norm.weight", "tok_embeddings.weight"]
            for kind in ("attention.wq", "attention.wk", "attention.wv", "attention.wo", "feed_forward.w1",
                         "feed_forward.w2", "feed_forward.w3"):
                order += [f"layers.{i}.{kind}.weight" for i in range(L)]
            for name in order:
                f.write(floats(p[name]))
        if untied:
            f.write(floats(p["output.weight"]))


def write_case(name, version, V, T, E, L, H, Hkv, F, untied, n):
    torch.manual_seed(zlib.crc32(name.encode()))
    rnd = lambda *shape: (torch.randn(*shape) * 0.3).double()  # noqa: E731
    p = {k: v.float().double() for k, v in llama_params(V, E, L, H, Hkv, F, untied, rnd).items()}
    write_bin(os.path.join(OUT_DIR, f"llama2c_{name}.bin"), version, p, V, T, E, L, H, Hkv, F, untied)
    ids = torch.randint(0, V, (n,))
    with torch.no_grad():
        logits = llama_forward(p, ids, L, H, Hkv, 1e-5, 10000.0, True)
    write_safetensors(os.path.join(OUT_DIR, f"llama2c_{name}.safetensors"),
                      {"ids": ids, "logits": logits.float()},
                      {"version": version, "ffn_hidden": F, "num_layers": L, "context": T})
    print(f"llama2c_{name}: version {version}, {n} tokens")


if __name__ == "__main__":
    for case, args in CASES.items():
        write_case(case, *args)
