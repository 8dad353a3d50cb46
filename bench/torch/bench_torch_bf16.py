#!/usr/bin/env python3
"""../shared/bench/bench_torch.py with every timed call under torch.autocast("cpu",
dtype=torch.bfloat16): PyTorch's own bf16 (its linear layers and matmuls in bf16 through oneDNN,
softmax, norms and losses kept in float32 by autocast's rules), the peer of
`attn bench ... --matmul-precision medium`. Same arguments and JSON line as bench_torch.py, with
"autocast": "bf16" added.
Usage: /usr/bin/python3 bench/torch/bench_torch_bf16.py encoder --mode train [options]"""
import contextlib
import importlib.util
import io
import json
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "..", "..", "shared", "bench", "bench_torch.py")
spec = importlib.util.spec_from_file_location("bench_torch", path)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

timeit = bench.timeit


def timeit_bf16(fn, *args, **kwargs):
    def under_autocast():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fn()
    return timeit(under_autocast, *args, **kwargs)


bench.timeit = timeit_bf16
text = io.StringIO()
with contextlib.redirect_stdout(text):
    bench.main()
lines = text.getvalue().splitlines()
record = json.loads(lines[-1])
record["autocast"] = "bf16"
print("\n".join(lines[:-1] + [json.dumps(record)]))
