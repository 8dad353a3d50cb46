#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_golden_ops.c and tests/test_mlp_parity.c
compare libattn against.

Run from the repository root with Debian's interpreter (torch imports only there):
    /usr/bin/python3 tests/golden/make_golden.py

Each op case writes tests/golden/op_<case>.safetensors holding its float inputs (by name), its
integer inputs (I64), the output `out`, a random upstream gradient `grad_out` of out's shape,
and `grad.<input>` = d(sum(out * grad_out)) / d(input) for every float input. Ops with two
outputs (split) store out0/out1 and grad_out0/grad_out1 instead. The options of each case
(dims, flags, eps, ...) are fixed by its name and mirrored in the C test's table.

Dropout has no golden case: torch's RNG cannot be reproduced in C, so dropout is covered by the
finite-difference and statistical tests instead.

mlp_adamw.safetensors is the end-to-end case: Embedding -> Linear -> GELU -> LayerNorm ->
Linear -> cross entropy trained for 10 AdamW steps (see mlp_adamw() below).

Everything is float32 and seeded per case (torch.manual_seed(crc32(case name))), so a rerun on
the same machine gives identical bytes; on another CPU or BLAS the GEMM-backed results (linear,
matmul) and mlp_adamw move in their last bits (tests/golden/README.md).
"""
import os
import zlib

import torch
import torch.nn.functional as F

OUT_DIR = os.path.join("tests", "golden")

# ---------------------------------------------------------------------------------------------
# safetensors writer (format: ../shared/research/ecosystem.md 3.1)
# ---------------------------------------------------------------------------------------------
from safetensors_writer import write_safetensors  # noqa: E402 (the script folder is on sys.path)


# ---------------------------------------------------------------------------------------------
# op cases
# ---------------------------------------------------------------------------------------------
def rn(*shape):
    return torch.randn(tuple(shape), dtype=torch.float32)


def away_from_zero(*shape):
    """Denominators: |x| in [0.5, 1.5), random sign."""
    mag = torch.rand(*shape, dtype=torch.float32) + 0.5
    sign = torch.where(torch.rand(*shape) < 0.5, -1.0, 1.0)
    return mag * sign


def op_case(name, make_inputs, fn):
    """make_inputs() -> dict name -> tensor (float32 = differentiable, int64 = not);
    fn(**inputs) -> out or a tuple of outs."""
    torch.manual_seed(zlib.crc32(name.encode()))
    inputs = make_inputs()
    for t in inputs.values():
        if t.is_floating_point():
            t.requires_grad_(True)
    outs = fn(**inputs)
    single = not isinstance(outs, tuple)
    outs = (outs,) if single else outs
    grad_outs = [rn(*o.shape) for o in outs]
    torch.autograd.backward(list(outs), grad_outs)

    file = dict(inputs)
    for i, (o, g) in enumerate(zip(outs, grad_outs)):
        suffix = "" if single else str(i)
        file["out" + suffix] = o
        file["grad_out" + suffix] = g
    for k, t in inputs.items():
        if t.is_floating_point():
            file["grad." + k] = t.grad if t.grad is not None else torch.zeros_like(t)
    write_safetensors(os.path.join(OUT_DIR, "op_%s.safetensors" % name), file, None)


def binary_cases():
    ops = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    # broadcast patterns: (a shape, b shape)
    patterns = {"bc1": ((2, 3, 4), (3, 1)), "bc2": ((4,), (2, 3, 4)),
                "bc3": ((2, 1, 4), (3, 1)), "same": ((2, 3, 4), (2, 3, 4))}
    for op, f in ops.items():
        for pat, (sa, sb) in patterns.items():
            mk_b = away_from_zero if op == "div" else rn
            op_case("%s_%s" % (op, pat), lambda sa=sa, sb=sb, mk_b=mk_b: {"a": rn(*sa), "b": mk_b(*sb)},
                    lambda a, b, f=f: f(a, b))


def matmul_cases():
    t = lambda x: x.transpose(-1, -2)
    # (name, a storage shape, b storage shape, trans_a, trans_b)
    for name, sa, sb, ta, tb in [("batched", (2, 3, 5), (2, 5, 4), 0, 0),
                                 ("ta", (2, 5, 3), (2, 5, 4), 1, 0),
                                 ("tb", (2, 3, 5), (2, 4, 5), 0, 1),
                                 ("tab", (2, 5, 3), (2, 4, 5), 1, 1),
                                 ("shared", (2, 3, 5), (5, 4), 0, 0),
                                 ("shared_tb", (2, 3, 5), (4, 5), 0, 1),
                                 ("2d", (3, 5), (5, 4), 0, 0)]:
        op_case("matmul_" + name, lambda sa=sa, sb=sb: {"a": rn(*sa), "b": rn(*sb)},
                lambda a, b, ta=ta, tb=tb: torch.matmul(t(a) if ta else a, t(b) if tb else b))


def unary_cases():
    x = lambda: {"x": rn(2, 3, 5)}
    op_case("scale", x, lambda x: x * 0.37)
    op_case("bias_add", lambda: {"x": rn(2, 3, 5), "bias": rn(5)}, lambda x, bias: x + bias)
    op_case("relu", x, lambda x: F.relu(x))
    op_case("gelu", x, lambda x: F.gelu(x))  # exact (erf) form, torch's default
    op_case("tanh", x, lambda x: torch.tanh(x))
    op_case("sigmoid", x, lambda x: torch.sigmoid(x))
    op_case("exp", x, lambda x: torch.exp(x))
    for dim, tag in [(-1, "last"), (1, "dim1")]:
        op_case("softmax_" + tag, x, lambda x, dim=dim: F.softmax(x, dim=dim))
        op_case("log_softmax_" + tag, x, lambda x, dim=dim: F.log_softmax(x, dim=dim))


def nn_cases():
    op_case("layer_norm", lambda: {"x": rn(2, 3, 7), "weight": rn(7), "bias": rn(7)},
            lambda x, weight, bias: F.layer_norm(x, (7,), weight, bias, eps=1e-5))
    op_case("layer_norm_noaffine", lambda: {"x": rn(2, 3, 7)},
            lambda x: F.layer_norm(x, (7,), eps=1e-5))
    # padding_idx 1 appears twice among the ids; weight row 1 is nonzero (F.embedding gathers it
    # and only withholds its gradient).
    op_case("embedding", lambda: {"weight": rn(6, 3),
                                  "ids": torch.tensor([[0, 1, 5, 2], [1, 3, 3, 4]], dtype=torch.int64)},
            lambda weight, ids: F.embedding(ids, weight, padding_idx=1))
    op_case("linear", lambda: {"x": rn(2, 3, 5), "weight": rn(4, 5), "bias": rn(4)},
            lambda x, weight, bias: F.linear(x, weight, bias))
    op_case("linear_nobias", lambda: {"x": rn(2, 3, 5), "weight": rn(4, 5)},
            lambda x, weight: F.linear(x, weight))
    for pad in (1, 0):
        op_case("conv1d_pad%d" % pad, lambda: {"x": rn(2, 3, 7), "weight": rn(5, 3, 3), "bias": rn(5)},
                lambda x, weight, bias, pad=pad: F.conv1d(x, weight, bias, padding=pad))
    op_case("conv1d_nobias", lambda: {"x": rn(2, 3, 7), "weight": rn(5, 3, 3)},
            lambda x, weight: F.conv1d(x, weight, None, padding=1))


def reduce_cases():
    x = lambda: {"x": rn(2, 3, 4)}
    for red in ("sum", "mean"):
        f = getattr(torch, red)
        for dim, tag in [(0, "d0"), (1, "d1"), (-1, "dlast")]:
            for keep in (False, True):
                op_case("%s_%s_%s" % (red, tag, "keep" if keep else "drop"), x,
                        lambda x, f=f, dim=dim, keep=keep: f(x, dim=dim, keepdim=keep))
        op_case(red + "_all", x, lambda x, f=f: f(x))


def shape_cases():
    op_case("reshape", lambda: {"x": rn(2, 3, 4)}, lambda x: x.reshape(6, 4))
    op_case("transpose", lambda: {"x": rn(2, 3, 4)}, lambda x: x.transpose(1, 2))
    op_case("permute", lambda: {"x": rn(2, 3, 4, 5)}, lambda x: x.permute(0, 2, 1, 3))
    op_case("concat", lambda: {"x0": rn(2, 3, 4), "x1": rn(2, 2, 4)},
            lambda x0, x1: torch.cat([x0, x1], dim=1))
    op_case("split", lambda: {"x": rn(2, 5, 4)}, lambda x: tuple(torch.split(x, [2, 3], dim=1)))
    op_case("split_heads", lambda: {"x": rn(2, 3, 8)},
            lambda x: x.view(2, 3, 2, 4).transpose(1, 2))
    op_case("merge_heads", lambda: {"x": rn(2, 2, 3, 4)},
            lambda x: x.transpose(1, 2).reshape(2, 3, 8))


def loss_cases():
    target = lambda: torch.tensor([3, 0, -100, 4, 1, 1], dtype=torch.int64)
    for ls, tag in [(0.0, "ls0"), (0.1, "ls01")]:
        op_case("cross_entropy_" + tag, lambda: {"logits": rn(6, 5), "target": target()},
                lambda logits, target, ls=ls: F.cross_entropy(logits, target, ignore_index=-100,
                                                              label_smoothing=ls))
    op_case("mse_loss", lambda: {"pred": rn(2, 3, 4), "target": rn(2, 3, 4)},
            lambda pred, target: F.mse_loss(pred, target))


# ---------------------------------------------------------------------------------------------
# end to end: a small MLP trained 10 AdamW steps
# ---------------------------------------------------------------------------------------------
class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 8)
        self.fc1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16, eps=1e-5)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, ids):
        h = self.fc1(self.emb(ids))
        return self.fc2(self.norm(F.gelu(h))).reshape(-1, 3)


def mlp_adamw():
    torch.manual_seed(0)
    model = MLP()
    gen = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, 11, (4, 5), generator=gen)
    targets = torch.randint(0, 3, (20,), generator=gen)
    file = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = F.cross_entropy(model(ids), targets)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    file["ids"] = ids
    file["targets"] = targets
    file["losses"] = torch.tensor(losses, dtype=torch.float32)
    for k, v in model.state_dict().items():
        file["final." + k] = v.detach().clone()
    write_safetensors(os.path.join(OUT_DIR, "mlp_adamw.safetensors"), file,
                      {"torch": torch.__version__, "steps": 10, "lr": 1e-2, "weight_decay": 0.01})


def main():
    torch.set_num_threads(1)  # one summation order, whatever the machine
    binary_cases()
    matmul_cases()
    unary_cases()
    nn_cases()
    reduce_cases()
    shape_cases()
    loss_cases()
    mlp_adamw()


if __name__ == "__main__":
    main()
