#!/usr/bin/env python3
"""The files attn_params_save writes, read back outside C (a ctest):
  1. examples/pytorch_weights loads PyTorch's nn.MultiheadAttention and TransformerEncoderLayer
     weights (tests/golden/sd_*.safetensors) and saves them again with attn_params_save;
  2. tools/safetensors_convert.py's reader (numpy only) takes those files: same names in the
     same order, F32, metadata format "pt", values bit-identical to PyTorch's;
  3. when torch imports (Debian's python3-torch 1.13: /usr/bin/python3), the tool turns them into
     .pt files that fresh torch.nn modules load with load_state_dict(strict=True), and the
     modules' outputs on sd_io's x equal PyTorch's golden outputs exactly.
Usage: state_dict_roundtrip.py EXAMPLE_BINARY   (from the repository root). Exit 77 (skipped)
when numpy is missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("state_dict_roundtrip: numpy missing, skipped")
    sys.exit(77)

sys.path.insert(0, "tools")
import safetensors_convert as stc  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed, failed = passed + bool(ok), failed + (not ok)


def main():
    example = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([example, "tests/golden", tmp], capture_output=True, text=True)
        check(run.returncode == 0, f"{example} loads, runs and saves (exit {run.returncode}) {run.stderr.strip()}")
        if run.returncode:
            return
        for name in ("mha", "encoder_layer"):
            ours, meta = stc.load_file(os.path.join(tmp, name + ".safetensors"))
            theirs, _ = stc.load_file(os.path.join("tests", "golden", "sd_" + name + ".safetensors"))
            check(list(ours) == list(theirs), f"{name}: the state_dict's names, in its order")
            check(meta.get("format") == "pt", f"{name}: metadata format \"pt\"")
            check(all(ours[k].dtype == np.float32 and np.array_equal(ours[k], theirs[k]) for k in theirs),
                  f"{name}: F32 values bit-identical to PyTorch's")
        try:
            import torch
            from torch import nn
        except ImportError:
            print("state_dict_roundtrip: torch not importable, torch part skipped")
            return
        torch.set_num_threads(1)
        io, _ = stc.load_file("tests/golden/sd_io.safetensors")
        x = torch.from_numpy(io["x"])
        modules = {"mha": nn.MultiheadAttention(16, 4, batch_first=True),
                   "encoder_layer": nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)}
        for name, module in modules.items():
            pt = os.path.join(tmp, name + ".pt")
            subprocess.run([sys.executable, "tools/safetensors_convert.py",
                            os.path.join(tmp, name + ".safetensors"), pt], check=True, capture_output=True)
            result = module.load_state_dict(torch.load(pt), strict=True)
            check(not result.missing_keys and not result.unexpected_keys,
                  f"{name}: torch load_state_dict(strict=True) takes the file")
            module.eval()
        causal = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
        with torch.no_grad():
            out, weights = modules["mha"](x, x, x, attn_mask=causal, need_weights=True)
            layer_out = modules["encoder_layer"](x)
        check(np.array_equal(out.numpy(), io["mha_out"]) and np.array_equal(weights.numpy(), io["mha_weights"]),
              "mha: torch's module with the saved weights gives PyTorch's golden outputs exactly")
        check(np.array_equal(layer_out.numpy(), io["layer_out"]),
              "encoder_layer: torch's module with the saved weights gives the golden output exactly")


if __name__ == "__main__":
    main()
    print(f"state_dict_roundtrip: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
