#!/usr/bin/python3
"""Writes the golden files of PyTorch weights loaded by libattn (attn_params_load): torch.nn
modules saved with torch.save and converted to safetensors by tools/safetensors_convert.py (its
command line, as a user with torch 1.13 would run it), and their inputs and outputs. Read by
examples/pytorch_weights.c and tests/test_params_load.c.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_state_dict.py

Files:
  sd_mha.safetensors            nn.MultiheadAttention(16, 4, batch_first=True).state_dict()
                                (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias)
  sd_encoder_layer.safetensors  nn.TransformerEncoderLayer(16, 4, dim_feedforward=32,
                                batch_first=True).state_dict(): post-LN, ReLU, eps 1e-5
                                (self_attn.*, linear1.*, linear2.*, norm1.*, norm2.*)
  sd_encoder.safetensors        nn.TransformerEncoder of 2 layers TransformerEncoderLayer(16, 4,
                                32, activation="gelu", norm_first=True, batch_first=True):
                                layers.0.*, layers.1.* (each layer loaded with its prefix)
  sd_io.safetensors             x (2, 5, 16); mha_out (2, 5, 16) and mha_weights (2, 5, 5)
                                (averaged over heads) of mha(x, x, x) under the causal float mask
                                (-inf above the diagonal); layer_out and encoder_out (2, 5, 16)
Every parameter gets N(0, 0.1) noise after PyTorch's init, so biases (zero at init in MHA) and
the two layers of the encoder (deep copies of one layer) differ. The modules run in eval mode
(no dropout) under torch.no_grad(), as a user runs inference. The script then converts each
weight file back to a .pt with the same tool and checks that load_state_dict(strict=True) of a
fresh module gives bit-identical outputs: the conversion loses nothing either way.
Deterministic: torch.manual_seed(0), one thread, float32.
"""
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import safetensors_convert  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "safetensors_convert.py")
OUT = os.path.join(ROOT, "tests", "golden")
E, H, F, B, L = 16, 4, 32, 2, 5


def modules():
    mha = nn.MultiheadAttention(E, H, batch_first=True)
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=F, batch_first=True)
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, H, dim_feedforward=F, activation="gelu", norm_first=True,
                                   batch_first=True), num_layers=2, enable_nested_tensor=False)
    return {"mha": mha, "encoder_layer": layer, "encoder": encoder}


def run(mods, x):
    causal = torch.triu(torch.full((L, L), float("-inf")), diagonal=1)
    with torch.no_grad():
        mha_out, mha_weights = mods["mha"](x, x, x, attn_mask=causal, need_weights=True)
        return {"mha_out": mha_out, "mha_weights": mha_weights,
                "layer_out": mods["encoder_layer"](x), "encoder_out": mods["encoder"](x)}


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    mods = modules()
    with torch.no_grad():
        for m in mods.values():
            for p in m.parameters():
                p.add_(0.1 * torch.randn_like(p))
    for m in mods.values():
        m.eval()
    x = torch.randn(B, L, E)
    outs = run(mods, x)
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in mods.items():
            pt = os.path.join(tmp, name + ".pt")
            st = os.path.join(OUT, "sd_" + name + ".safetensors")
            torch.save(m.state_dict(), pt)
            subprocess.run([sys.executable, TOOL, pt, st], check=True)
        # back: safetensors -> .pt -> a fresh module, strict
        fresh = modules()
        for name, m in fresh.items():
            pt = os.path.join(tmp, name + "_back.pt")
            subprocess.run([sys.executable, TOOL, os.path.join(OUT, "sd_" + name + ".safetensors"), pt],
                           check=True)
            m.load_state_dict(torch.load(pt), strict=True)
            m.eval()
        again = run(fresh, x)
        for key, value in outs.items():
            assert torch.equal(value, again[key]), key
    tensors = {"x": x.numpy()}
    tensors.update({k: v.numpy() for k, v in outs.items()})
    safetensors_convert.save_file(tensors, os.path.join(OUT, "sd_io.safetensors"),
                                  {"torch": torch.__version__, "script": "make_golden_state_dict.py"})
    print("wrote sd_mha, sd_encoder_layer, sd_encoder, sd_io; round trip through .pt bit-identical")


if __name__ == "__main__":
    main()
