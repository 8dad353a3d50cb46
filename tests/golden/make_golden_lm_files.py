#!/usr/bin/python3
"""Writes llama2.c and llm.c checkpoints and what PyTorch computes with them, for
tests/test_lm_llama2c.c and tests/test_lm_llmc.c: tests/golden/llama2c_<case>.bin,
llama2c_<case>.safetensors, llmc_gpt2.bin and llmc_gpt2.safetensors.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_lm_files.py

The .bin files are laid out from the format's definition (llama2.c's export.py, legacy_export
for version 0 and version1_export for 1: header, then the float32 tensors in that order,
little-endian), not by attn. The model is llama2.c's: RMSNorm eps 1e-5, rotary pairs (2i, 2i+1)
of base 10000 (Meta's complex form), grouped-query attention, SwiGLU, tied or untied output;
make_golden_lm.py's composition, in float64 on the float32 weights. Each .safetensors holds ids
(one sequence) and logits (n, V): the model's next-token logits at every position.

The llm.c file is laid out from its train_gpt2.py's write_model (version 3: a 256-int32 header,
then float32 wte padded with zero rows to a multiple of 128, wpe, and the 12 per-layer kinds each
over the layers, ln_f): a GPT-2 of make_golden_lm.py's composition (LayerNorm eps 1e-5, GELU in
its tanh form, a feed-forward of 4 C, tied output).
Deterministic: torch.manual_seed(crc32(name)).
"""
import os
import struct
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_lm import gpt2_forward, gpt2_params, llama_forward, llama_params  # noqa: E402
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


def write_llmc(name="gpt2", V=37, T=12, C=32, L=2, H=4, n=11):
    torch.manual_seed(zlib.crc32(("llmc_" + name).encode()))
    rnd = lambda *shape: (torch.randn(*shape) * 0.3).double()  # noqa: E731
    p = {k: v.float().double() for k, v in gpt2_params(V, T, C, L, 4 * C, rnd).items()}
    Vp = (V + 127) // 128 * 128
    with open(os.path.join(OUT_DIR, f"llmc_{name}.bin"), "wb") as f:
        f.write(struct.pack("<256i", *([20240326, 3, T, V, L, H, C, Vp] + [0] * 248)))
        f.write(floats(torch.cat([p["transformer.wte.weight"], torch.zeros(Vp - V, C, dtype=torch.float64)])))
        f.write(floats(p["transformer.wpe.weight"]))
        for kind in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                     "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                     "mlp.c_proj.weight", "mlp.c_proj.bias"):
            for i in range(L):
                f.write(floats(p[f"transformer.h.{i}.{kind}"]))
        f.write(floats(p["transformer.ln_f.weight"]))
        f.write(floats(p["transformer.ln_f.bias"]))
    ids = torch.randint(0, V, (n,))
    with torch.no_grad():
        logits = gpt2_forward(p, ids, L, H, 1e-5)
    write_safetensors(os.path.join(OUT_DIR, f"llmc_{name}.safetensors"), {"ids": ids, "logits": logits.float()},
                      {"padded_vocab_size": Vp})
    print(f"llmc_{name}: {n} tokens")


if __name__ == "__main__":
    for case, args in CASES.items():
        write_case(case, *args)
    write_llmc()
