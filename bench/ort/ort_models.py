#!/usr/bin/env python3
"""Inputs and ONNX models for bench/compare_ort.sh (run with /usr/bin/python3: Debian's torch 1.13
and onnx 1.12; the opset-23 Attention graph is written by hand, since onnx 1.12 predates it).

  ort_models.py sdpa DIR L        q, k, v ~ N(0, 1) of (B 8, H 8, L, d 64): DIR/sdpa.safetensors
                                  (ours), DIR/{q,k,v}.bin (B, H, L, d) and DIR/{q,k,v}_bsd.bin
                                  (B, L, H d) for ONNX Runtime, and per mask (none, causal) three
                                  graphs: DIR/mha_<mask>.onnx (com.microsoft MultiHeadAttention,
                                  (B, L, H d) in and out), DIR/attention23_<mask>.onnx (ONNX
                                  Attention, opset 23, 4-D) and DIR/math_<mask>.onnx (MatMul,
                                  Softmax, MatMul; the causal mask added as -inf above the diagonal)
  ort_models.py encoder DIR       nn.TransformerEncoderLayer(512, 8, 2048, dropout 0,
                                  batch_first) exported by torch.onnx (opset 17):
                                  DIR/encoder.onnx, DIR/encoder.safetensors (x (8, 256, 512) and
                                  the state_dict, for ours), DIR/x.bin
  ort_models.py diff OURS.safetensors ORT.bin LAYOUT
                                  max |ours - ORT| over the output; LAYOUT bhld (as ours) or bld
                                  (MultiHeadAttention's (B, L, H d)); prints one JSON line
Every .bin is raw little-endian float32 in C order."""
import json
import math
import os
import struct
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden"))
from safetensors_writer import write_safetensors  # noqa: E402

B, H, D = 8, 8, 64


def read_safetensors(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        meta = header[name]
        start, end = meta["data_offsets"]
        f.seek(8 + n + start)
        return np.frombuffer(f.read(end - start), dtype="<f4").reshape(meta["shape"])


def save_model(graph, path, opsets):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    onnx.save(model, path)


def sdpa_graphs(folder, L):
    scale = 1.0 / math.sqrt(D)
    f4 = TensorProto.FLOAT
    bhld = [B, H, L, D]
    bld = [B, L, H * D]
    for causal in (False, True):
        mask = "causal" if causal else "none"
        # com.microsoft MultiHeadAttention: query, key, value (B, L, H d); unidirectional = causal
        ins = [helper.make_tensor_value_info(n, f4, bld) for n in ("q", "k", "v")]
        node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["out"], domain="com.microsoft",
                                num_heads=H, scale=scale, unidirectional=int(causal))
        g = helper.make_graph([node], "mha", ins, [helper.make_tensor_value_info("out", f4, bld)])
        save_model(g, os.path.join(folder, f"mha_{mask}.onnx"), [("", 17), ("com.microsoft", 1)])
        # ONNX Attention (opset 23): Q, K, V (B, H, L, d), is_causal
        ins = [helper.make_tensor_value_info(n, f4, bhld) for n in ("q", "k", "v")]
        node = helper.make_node("Attention", ["q", "k", "v"], ["out"], is_causal=int(causal), scale=scale)
        g = helper.make_graph([node], "attention23", ins, [helper.make_tensor_value_info("out", f4, bhld)])
        save_model(g, os.path.join(folder, f"attention23_{mask}.onnx"), [("", 23)])
        # the math graph: softmax(Q K^T scale (+ mask)) V
        nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("MatMul", ["q", "kt"], ["s0"]),
                 helper.make_node("Mul", ["s0", "scale"], ["s1"])]
        inits = [helper.make_tensor("scale", f4, [], [scale])]
        scores = "s1"
        if causal:  # -inf above the diagonal, 0 elsewhere, built in the graph (no L x L initializer)
            inits += [helper.make_tensor("lxl", TensorProto.INT64, [2], [L, L]),
                      helper.make_tensor("one", TensorProto.INT64, [], [1])]
            nodes += [helper.make_node("ConstantOfShape", ["lxl"], ["ninf"],
                                       value=helper.make_tensor("v", f4, [1], [-math.inf])),
                      helper.make_node("Trilu", ["ninf", "one"], ["mask"], upper=1),
                      helper.make_node("Add", ["s1", "mask"], ["s2"])]
            scores = "s2"
        nodes += [helper.make_node("Softmax", [scores], ["p"], axis=-1),
                  helper.make_node("MatMul", ["p", "v"], ["out"])]
        g = helper.make_graph(nodes, "math", ins, [helper.make_tensor_value_info("out", f4, bhld)], inits)
        save_model(g, os.path.join(folder, f"math_{mask}.onnx"), [("", 17)])


def sdpa(folder, L):
    torch.manual_seed(L)
    t = {n: torch.randn(B, H, L, D) for n in ("q", "k", "v")}
    write_safetensors(os.path.join(folder, "sdpa.safetensors"), t)
    for n, x in t.items():
        x.numpy().astype("<f4").tofile(os.path.join(folder, f"{n}.bin"))
        x.transpose(1, 2).reshape(B, L, H * D).numpy().astype("<f4").tofile(os.path.join(folder, f"{n}_bsd.bin"))
    sdpa_graphs(folder, L)


def encoder(folder):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True).eval()
    x = torch.randn(8, 256, 512)
    torch.onnx.export(layer, (x,), os.path.join(folder, "encoder.onnx"), opset_version=17, input_names=["x"],
                      output_names=["out"], do_constant_folding=True)
    tensors = {"x": x}
    tensors.update({n: p.detach() for n, p in layer.state_dict().items()})
    write_safetensors(os.path.join(folder, "encoder.safetensors"), tensors, {"num_heads": 8})
    x.numpy().astype("<f4").tofile(os.path.join(folder, "x.bin"))


def diff(ours_path, ort_path, layout):
    ours = read_safetensors(ours_path, "out")
    theirs = np.fromfile(ort_path, dtype="<f4")
    if layout == "bld":  # (B, L, H d) -> (B, H, L, d)
        b, h, l, d = ours.shape
        theirs = theirs.reshape(b, l, h, d).transpose(0, 2, 1, 3)
    theirs = theirs.reshape(ours.shape)
    print(json.dumps({"max_abs_diff": float(np.max(np.abs(ours.astype(np.float64) - theirs))),
                      "max_abs_out": float(np.max(np.abs(ours)))}))


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "sdpa" and len(sys.argv) == 4:
        sdpa(sys.argv[2], int(sys.argv[3]))
    elif cmd == "encoder" and len(sys.argv) == 3:
        encoder(sys.argv[2])
    elif cmd == "diff" and len(sys.argv) == 5 and sys.argv[4] in ("bhld", "bld"):
        diff(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


main()
