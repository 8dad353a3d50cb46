#!/usr/bin/env python3
"""Seed 003's Nadaraya-Watson regression, run as the tutorial runs it (same seed, data, model,
SGD lr 0.5, 20 epochs), saved for `attn nw --data`: x_train, y_train, x_test, y_true, and the
expected per-epoch `losses` and `w` (after each step, as the seed prints) and the test
predictions `y_hat`. Run from the repo root with Debian's torch:
    /usr/bin/python3 tests/golden/make_golden_nw.py
"""
import torch
from torch import nn

from safetensors_writer import write_safetensors

torch.set_num_threads(1)
torch.manual_seed(66666666666666)

n_train = 150
x_train = torch.sort(torch.rand(n_train) * 5)[0]


def f(x):
    return 2.333 * torch.sin(x) + x**0.666


y_train = f(x_train) + torch.randn(n_train) * 0.5
x_test = torch.arange(0, 5, 0.1)
y_true = f(x_test)


class NWKernelRegression(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(1.0))

    def forward(self, queries, keys, values):
        dis = queries.unsqueeze(1) - keys
        scores = -0.5 * (self.w * dis) ** 2
        attention_weights = torch.softmax(scores, dim=1)
        return torch.sum(attention_weights * values, dim=1)


mask = ~torch.eye(n_train, dtype=torch.bool)
keys_train = x_train.repeat(n_train, 1)[mask].reshape(n_train, n_train - 1)
values_train = y_train.repeat(n_train, 1)[mask].reshape(n_train, n_train - 1)
model = NWKernelRegression()
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
losses, ws = [], []
for epoch in range(20):
    y_hat = model(x_train, keys_train, values_train)
    loss = loss_fn(y_hat, y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    ws.append(model.w.item())
    print(f"epoch {epoch + 1:02d}, loss = {loss.item():.4f}, w = {model.w.item():.4f}")
with torch.no_grad():
    y_hat = model(x_test, x_train.repeat(len(x_test), 1), y_train.repeat(len(x_test), 1))

tensors = {"x_train": x_train, "y_train": y_train, "x_test": x_test.float(), "y_true": y_true.float(),
           "losses": torch.tensor(losses), "w": torch.tensor(ws), "y_hat": y_hat}
write_safetensors("tests/golden/nw_seed003.safetensors", tensors,
                  {"source": "seed 003 NW regression, torch 1.13"})
