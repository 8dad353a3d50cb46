#!/usr/bin/env python3
"""The files attn_params_save writes, read back outside C (two ctests):
  1. examples/pytorch_weights loads PyTorch's nn.MultiheadAttention and TransformerEncoderLayer
     weights (tests/golden/sd_*.safetensors) and saves them again with attn_params_save;
  2. (state_dict_roundtrip) tools/safetensors_convert.py's reader (numpy only) takes those files:
     same names in the same order, F32, metadata format "pt", values bit-identical to the ones
     loaded (a copy: no arithmetic, the same bits on every host);
  3. (state_dict_roundtrip_torch, --torch) torch (Debian's python3-torch 1.13: /usr/bin/python3)
     takes them too: tools/safetensors_convert.py turns them into .pt files that fresh torch.nn
     modules load with load_state_dict(strict=True), and the modules' outputs on sd_io's x are
     those of the same modules loaded straight from the golden sd_*.safetensors, run by this
     torch on this host (equal but for a rounding bound; in practice bit for bit: the same
     weights, the same program). Against sd_io's outputs, written by torch on another host, they
     are held to the float32 bound of two hosts' runs only (below).
Usage: state_dict_roundtrip.py EXAMPLE_BINARY [--torch]   (from the repository root). Exit 77
(ctest: skipped) when numpy is missing, or with --torch when torch does not import.
"""
import math
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

U = 2.0 ** -24  # float32's unit roundoff
LAMBDA = 8.0    # as tests/testkit.h's TK_LAMBDA
PLANTED = 2e-4  # as TK_PLANTED
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed, failed = passed + bool(ok), failed + (not ok)


def bound(sides, n, cond):
    """tests/testkit.h's atol of tk_tol_of: sides * min(n, lambda sqrt(n)) * cond * u, times max|ref|."""
    return sides * min(n, LAMBDA * math.sqrt(n)) * cond * U


def close(what, got, ref, atol, rtol=16 * U):
    """|got - ref| <= rtol |ref_i| + atol max|ref| (testkit.h's form); returns (ok, worst margin).
    Also checks, as testkit's tk_close_scaled does, that 2e-4 of max|ref| added to the element with
    the loosest bound, against the sign of its error, would fail it."""
    got, ref = np.asarray(got, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    tol = rtol * np.abs(ref) + atol * np.abs(ref).max()
    err = got - ref
    margin = float((np.abs(err) / np.where(tol > 0, tol, 1.0)).max()) if err.size else 0.0
    i = int(np.argmax(tol + np.abs(err)))
    planted = err[i] - np.copysign(PLANTED * np.abs(ref).max(), err[i] if err[i] else 1.0)
    check(abs(planted) > tol[i], f"{what}: an error of {PLANTED} max|ref| in one element fails the bound")
    return bool(np.all(np.abs(err) <= tol)), margin


def saved_files(example, tmp):
    emulator = os.environ.get("ATTN_TEST_EMULATOR", "").split()  # qemu-user for a cross build
    run = subprocess.run([*emulator, example, "tests/golden", tmp], capture_output=True, text=True)
    check(run.returncode == 0, f"{example} loads, runs and saves (exit {run.returncode}) {run.stderr.strip()}")
    return run.returncode == 0


def numpy_part(tmp):
    for name in ("mha", "encoder_layer"):
        ours, meta = stc.load_file(os.path.join(tmp, name + ".safetensors"))
        theirs, _ = stc.load_file(os.path.join("tests", "golden", "sd_" + name + ".safetensors"))
        check(list(ours) == list(theirs), f"{name}: the state_dict's names, in its order")
        check(meta.get("format") == "pt", f"{name}: metadata format \"pt\"")
        check(all(ours[k].dtype == np.float32 and np.array_equal(ours[k], theirs[k]) for k in theirs),
              f"{name}: F32 values bit-identical to the ones loaded")


def torch_part(tmp, torch, nn):
    torch.set_num_threads(1)
    io, _ = stc.load_file("tests/golden/sd_io.safetensors")
    x = torch.from_numpy(io["x"])

    def modules():
        return {"mha": nn.MultiheadAttention(16, 4, batch_first=True),
                "encoder_layer": nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)}

    ours, golden = modules(), modules()
    for name in ours:
        pt = os.path.join(tmp, name + ".pt")
        subprocess.run([sys.executable, "tools/safetensors_convert.py",
                        os.path.join(tmp, name + ".safetensors"), pt], check=True, capture_output=True)
        result = ours[name].load_state_dict(torch.load(pt), strict=True)
        check(not result.missing_keys and not result.unexpected_keys,
              f"{name}: torch load_state_dict(strict=True) takes the file")
        sd, _ = stc.load_file(os.path.join("tests", "golden", "sd_" + name + ".safetensors"))
        golden[name].load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
        ours[name].eval()
        golden[name].eval()
    causal = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)

    def outputs(mods):
        with torch.no_grad():
            out, weights = mods["mha"](x, x, x, attn_mask=causal, need_weights=True)
            return {"mha_out": out.numpy(), "mha_weights": weights.numpy(),
                    "layer_out": mods["encoder_layer"](x).numpy()}

    got, here = outputs(ours), outputs(golden)
    # Two hosts' float32 runs of the same module (sides 2): n roundings on the longest path of the
    # forward: mha: in-projection 16, scores over a head of 4, softmax and @ v over 5, the heads'
    # mean (4), out-projection 16: 50; the encoder layer adds 2 LayerNorms (16) and the FFN (16,
    # 32): 130; cond 4 (softmax-weighted means of O(1) values), 8 roundings of an element's own.
    depth = {"mha_out": 50, "mha_weights": 50, "layer_out": 130}
    for key, n in depth.items():
        same = np.array_equal(got[key], here[key])
        ok, margin = close(key + " (this host)", got[key], here[key], bound(1, n, 4))
        check(ok, f"{key}: the saved weights in torch give what the golden weights give in torch on this "
                  f"host ({'bit for bit' if same else f'margin {margin:.3g}'})")
        ok, margin = close(key + " (sd_io)", got[key], io[key], bound(2, n, 4))
        check(ok, f"{key}: within the float32 bound of sd_io's, written by torch on another host "
                  f"(margin {margin:.3g}; {'the same bits' if np.array_equal(got[key], io[key]) else 'other bits'})")


def main():
    example, want_torch = sys.argv[1], "--torch" in sys.argv[2:]
    if want_torch:
        try:
            import torch
            from torch import nn
        except ImportError:
            print("state_dict_roundtrip: torch not importable (Debian's python3-torch under /usr/bin/python3), skipped")
            sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        if not saved_files(example, tmp):
            return
        if want_torch:
            torch_part(tmp, torch, nn)
        else:
            numpy_part(tmp)


if __name__ == "__main__":
    main()
    print(f"state_dict_roundtrip: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
