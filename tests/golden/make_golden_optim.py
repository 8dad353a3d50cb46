#!/usr/bin/python3
"""Writes tests/golden/optim_torch_steps.safetensors: torch.optim 1.13's own float32 updates, which
tests/test_optim.c holds libattn's optimizers to within the float32 bound of a few elementwise
steps (it prints how many elements are torch's bits: all of them where both fuse the same
products; which ones torch's kernels fuse depends on the CPU capability they were chosen for).

One parameter of 1031 elements (a few vectors and a tail) ~ N(0, 1), three steps with stored
gradients ~ N(0, 1) (scaled by 1e-3 in the third step), for each case:
  sgd_momentum   SGD(lr=0.01, momentum=0.9, dampening=0.1, weight_decay=0.01)
  sgd_nesterov   SGD(lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.01)
  adam_l2        Adam(lr=0.001, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)
  adamw          AdamW(lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
Tensors: p0, grad_1, grad_2, grad_3, and <case>.p_1, <case>.p_2, <case>.p_3 (the parameter after
each step). Seeded: reruns on one machine write identical bytes.

Run from the repository root: /usr/bin/python3 tests/golden/make_golden_optim.py
"""
import os

import torch

from safetensors_writer import write_safetensors  # noqa: E402 (the script folder is on sys.path)

N, STEPS = 1031, 3
CASES = {
    "sgd_momentum": lambda p: torch.optim.SGD([p], lr=0.01, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda p: torch.optim.SGD([p], lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam_l2": lambda p: torch.optim.Adam([p], lr=0.001, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01),
    "adamw": lambda p: torch.optim.AdamW([p], lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
}


def main():
    torch.set_num_threads(1)
    torch.manual_seed(16)
    p0 = torch.randn(N)
    grads = [torch.randn(N) * (1e-3 if t == STEPS - 1 else 1.0) for t in range(STEPS)]
    tensors = {"p0": p0}
    tensors.update({"grad_%d" % (t + 1): g for t, g in enumerate(grads)})
    for name, make in CASES.items():
        p = p0.clone().requires_grad_(True)
        opt = make(p)
        for t, g in enumerate(grads):
            p.grad = g.clone()
            opt.step()
            tensors["%s.p_%d" % (name, t + 1)] = p.detach().clone()
    write_safetensors(os.path.join("tests", "golden", "optim_torch_steps.safetensors"), tensors,
                      {"torch": torch.__version__, "n": str(N), "steps": str(STEPS)})


if __name__ == "__main__":
    main()
