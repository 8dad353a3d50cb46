#!/usr/bin/python3
"""Writes the PyTorch golden files for libattn's attention mechanisms beyond SDPA/MHA:
tests/golden/mech_<case>.safetensors, read by tests/test_golden_mechanisms.c (the library) and
tests/test_cli_op.c (`attn op`).

Run from the repository root with Debian's interpreter (torch 1.13 imports only there):
    /usr/bin/python3 tests/golden/make_golden_mechanisms.py

Every module is the seed's own code (seed 002: EfficientAttention, ConvAttention and its
MultiHeadAttention with Wq/Wk/Wv/fc_out; seed 003: NWKernelRegression; D2L's AdditiveAttention
and masked_softmax), in eval mode, dropout 0. A file holds
  - the inputs: q, k, v (additive, nw, mha_seed_names) or x (linear, conv_attention), F32, each
    an independent leaf (so self-attention's q, k, v get separate gradients);
  - masks: valid_lens I64 (B) or (B, Lq) (D2L; every length >= 1, so D2L's -1e6 fill equals a
    -inf mask exactly in float32), key_padding_mask BOOL (B, L), true = padding;
  - the parameters under the state_dict names of the module the case names;
  - out, weights (the attention probabilities, where the mechanism has them), grad_out (random,
    out's shape), grad.<input> and grad.<param> = d sum(out * grad_out) / d that tensor.
Cases (the metadata repeats the options):
  additive_lens_batch / additive_lens_query   D2L AdditiveAttention(k_size 4, q_size 5, h 7),
      B 2, Lq 3, Lk 6, v 3; valid_lens (B) / (B, Lq). Params W_q.weight, W_k.weight, w_v.weight.
  nw_learned / nw_fixed   seed 003's NWKernelRegression on 12 training points with
      leave-one-out keys/values: q = x_train (12), k, v (12, 11); x_train and y_train are stored
      too. nw_learned has the parameter w (shape (), 1.3); nw_fixed has none (w = 1).
  linear_efficient / linear_shen / linear_padding   seed 002's EfficientAttention(8) on x
      (2, 5, 8); shen also softmaxes Q over the features; padding masks the last 2 positions of
      batch 1 (K logits set to -inf before the softmax over the sequence). Params
      to_query.weight/bias, to_key.*, to_value.*.
  conv_attention / conv_attention_seed   seed 002's ConvAttention(8, 2) (kernel 3) with the
      seed's MultiHeadAttention, on x (2, 5, 8); weights = its per-head (B, H, L, L) weights.
      Same numbers, two namings: conv_attention_seed keeps the seed's names
      (attention.Wq.weight, ..., attention.fc_out.bias); conv_attention converts them to
      nn.MultiheadAttention's (attention.in_proj_weight = cat(Wq, Wk, Wv), attention.in_proj_bias,
      attention.out_proj.weight/bias). conv.weight/bias, norm.weight/bias (norm randomised, so
      it matters).
  mha_seed_names   seed 002's MultiHeadAttention(8, 2) self-attention on the literal x
      (1, 4, 8) of the seed's section 1.2 (batch first), names Wq.weight ... fc_out.bias;
      weights per head (1, 2, 4, 4).
Deterministic: torch.manual_seed(crc32(case name)), one thread, float32.
"""
import os
import zlib

import torch
import torch.nn as nn

OUT_DIR = os.path.join("tests", "golden")
from safetensors_writer import write_safetensors  # noqa: E402 (the script folder is on sys.path)


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def save(name, inputs, params, extra, out, weights, meta):
    """Backward from a random grad_out and writes mech_<name>.safetensors. params: the
    (name, tensor) pairs to store; their .grad is stored as grad.<name>."""
    grad_out = torch.randn(out.shape)
    out.backward(grad_out)
    tensors = dict(inputs)
    tensors.update(extra)
    tensors.update({n: p for n, p in params})
    tensors["out"] = out
    if weights is not None:
        tensors["weights"] = weights
    tensors["grad_out"] = grad_out
    for n, t in inputs.items():
        if t.dtype == torch.float32:
            tensors["grad." + n] = t.grad
    for n, p in params:
        tensors["grad." + n] = p.grad
    for n, t in tensors.items():
        assert t is not None and (t.dtype != torch.float32 or torch.isfinite(t).all()), n
    write_safetensors(os.path.join(OUT_DIR, "mech_%s.safetensors" % name), tensors, meta)


# ---------------------------------------------------------------------------------------------
# D2L additive attention (d2l.ai, "Attention Scoring Functions")
# ---------------------------------------------------------------------------------------------
def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super(AdditiveAttention, self).__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = queries.unsqueeze(2) + keys.unsqueeze(1)
        features = torch.tanh(features)
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def additive_case(name, per_query):
    seed(name)
    b, lq, lk, q_size, k_size, h, dv = 2, 3, 6, 5, 4, 7, 3
    m = AdditiveAttention(k_size, q_size, h, 0.0).eval()
    inputs = {"q": leaf(torch.randn(b, lq, q_size)), "k": leaf(torch.randn(b, lk, k_size)),
              "v": leaf(torch.randn(b, lk, dv))}
    lens = torch.randint(1, lk, (b, lq) if per_query else (b,), dtype=torch.int64)  # 1..Lk-1
    out = m(inputs["q"], inputs["k"], inputs["v"], lens)
    inputs["valid_lens"] = lens
    save(name, inputs, list(m.named_parameters()), {}, out, m.attention_weights.detach(),
         {"kind": "additive", "valid_lens": "(B, Lq)" if per_query else "(B)",
          "query_size": q_size, "key_size": k_size, "num_hiddens": h})


# ---------------------------------------------------------------------------------------------
# Seed 003: Nadaraya-Watson kernel regression
# ---------------------------------------------------------------------------------------------
class NWKernelRegression(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(1.3))  # the seed starts at 1.0; 1.3 so w matters

    def forward(self, queries, keys, values):
        dis = queries.unsqueeze(1) - keys
        scores = -0.5 * (self.w * dis) ** 2

        attention_weights = torch.softmax(scores, dim=1)
        self.attention_weights = attention_weights  # added: the weights, for the golden file
        y_hat = torch.sum(attention_weights * values, dim=1)
        return y_hat


def nw_fixed_forward(queries, keys, values):
    """The fixed Gaussian kernel K(u) = exp(-u^2 / 2) (no parameter, w = 1)."""
    weights = torch.softmax(-0.5 * (queries.unsqueeze(1) - keys) ** 2, dim=1)
    return torch.sum(weights * values, dim=1), weights


def nw_case(name, learned):
    seed(name)
    n_train = 12
    x_train = torch.sort(torch.rand(n_train) * 5)[0]

    def f(x):
        return 2.333 * torch.sin(x) + x ** 0.666

    y_train = f(x_train) + torch.randn(n_train) * 0.5
    mask = ~torch.eye(n_train, dtype=torch.bool)
    keys = x_train.repeat(n_train, 1)[mask].reshape(n_train, n_train - 1)
    values = y_train.repeat(n_train, 1)[mask].reshape(n_train, n_train - 1)
    inputs = {"q": leaf(x_train), "k": leaf(keys), "v": leaf(values)}
    if learned:
        m = NWKernelRegression()
        out = m(inputs["q"], inputs["k"], inputs["v"])
        weights, params = m.attention_weights.detach(), list(m.named_parameters())
    else:
        out, weights = nw_fixed_forward(inputs["q"], inputs["k"], inputs["v"])
        weights, params = weights.detach(), []
    save(name, inputs, params, {"x_train": x_train, "y_train": y_train}, out, weights,
         {"kind": "nw", "learned_w": int(learned), "n_train": n_train})


# ---------------------------------------------------------------------------------------------
# Seed 002: EfficientAttention, its Shen variant and key padding
# ---------------------------------------------------------------------------------------------
class EfficientAttention(nn.Module):
    """线性复杂度的注意力机制 (seed 002, verbatim but for the two options)"""

    def __init__(self, embed_size, shen=False):
        super().__init__()
        self.embed_size = embed_size
        self.shen = shen
        self.to_query = nn.Linear(embed_size, embed_size)
        self.to_key = nn.Linear(embed_size, embed_size)
        self.to_value = nn.Linear(embed_size, embed_size)

    def forward(self, x, key_padding_mask=None):
        Q = self.to_query(x)
        K = self.to_key(x)
        V = self.to_value(x)
        if key_padding_mask is not None:  # padded keys out of the sequence softmax
            K = K.masked_fill(key_padding_mask[:, :, None], float("-inf"))
        K = K.softmax(dim=1)
        if self.shen:  # Shen et al. 2021: Q normalised over the features too
            Q = Q.softmax(dim=-1)
        context = torch.einsum('bnd,bne->bde', K, V)
        output = torch.einsum('bnd,bde->bne', Q, context)
        return output


def linear_case(name, shen=False, padding=False):
    seed(name)
    m = EfficientAttention(8, shen=shen)
    inputs = {"x": leaf(torch.randn(2, 5, 8))}
    kpm = None
    if padding:
        kpm = torch.zeros(2, 5, dtype=torch.bool)
        kpm[1, 3:] = True
    out = m(inputs["x"], kpm)
    if padding:
        inputs["key_padding_mask"] = kpm
    save(name, inputs, list(m.named_parameters()), {}, out, None,
         {"kind": "linear", "shen": int(shen), "key_padding": int(padding)})


# ---------------------------------------------------------------------------------------------
# Seed 002: MultiHeadAttention (Wq, Wk, Wv, fc_out) and ConvAttention
# ---------------------------------------------------------------------------------------------
def scaled_dot_product_attention(Q, K, V):
    matmul_qk = torch.matmul(Q, K.transpose(-2, -1))
    d_k = K.size(-1)
    scaled_attention_logits = matmul_qk / torch.sqrt(torch.tensor(d_k, dtype=torch.float32))
    attention_weights = torch.softmax(scaled_attention_logits, dim=-1)
    output = torch.matmul(attention_weights, V)
    return output, attention_weights


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_size, num_heads):
        super().__init__()
        self.embed_size = embed_size
        self.num_heads = num_heads
        self.head_dim = embed_size // num_heads
        assert self.head_dim * num_heads == embed_size
        self.Wq = nn.Linear(embed_size, embed_size)
        self.Wk = nn.Linear(embed_size, embed_size)
        self.Wv = nn.Linear(embed_size, embed_size)
        self.fc_out = nn.Linear(embed_size, embed_size)

    def split_heads(self, x):
        batch_size, seq_length, _ = x.size()
        return x.view(batch_size, seq_length, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, Q, K, V, mask=None):
        batch_size = Q.size(0)
        Q = self.Wq(Q)
        K = self.Wk(K)
        V = self.Wv(V)
        Q = self.split_heads(Q)
        K = self.split_heads(K)
        V = self.split_heads(V)
        attn_output, attn_weights = scaled_dot_product_attention(Q, K, V)
        attn_output = attn_output.transpose(1, 2).contiguous().view(
            batch_size, -1, self.embed_size)
        output = self.fc_out(attn_output)
        return output, attn_weights


class ConvAttention(nn.Module):
    def __init__(self, embed_size, num_heads, kernel_size=3):
        super().__init__()
        self.attention = MultiHeadAttention(embed_size, num_heads)
        self.conv = nn.Conv1d(
            in_channels=embed_size,
            out_channels=embed_size,
            kernel_size=kernel_size,
            padding=kernel_size // 2
        )
        self.norm = nn.LayerNorm(embed_size)

    def forward(self, x):
        attn_out, _ = self.attention(x, x, x)
        conv_out = self.conv(x.transpose(1, 2)).transpose(1, 2)
        combined = attn_out + conv_out
        return self.norm(combined)


def torch_mha_names(named, prefix):
    """Seed MHA (name, tensor) pairs under prefix -> nn.MultiheadAttention's, concatenating
    Wq, Wk, Wv into in_proj_*; other pairs pass through."""
    d = dict(named)
    out = [(prefix + "in_proj_weight",
            torch.cat([d[prefix + s + ".weight"] for s in ("Wq", "Wk", "Wv")])),
           (prefix + "in_proj_bias",
            torch.cat([d[prefix + s + ".bias"] for s in ("Wq", "Wk", "Wv")])),
           (prefix + "out_proj.weight", d[prefix + "fc_out.weight"]),
           (prefix + "out_proj.bias", d[prefix + "fc_out.bias"])]
    return out + [(n, t) for n, t in named if not n.startswith(prefix)]


def conv_attention_cases():
    seed("conv_attention")
    m = ConvAttention(embed_size=8, num_heads=2)
    with torch.no_grad():  # LayerNorm starts at ones/zeros: randomise so it matters
        m.norm.weight.copy_(1.0 + 0.2 * torch.randn(8))
        m.norm.bias.copy_(0.2 * torch.randn(8))
    captured = {}
    m.attention.register_forward_hook(lambda mod, args, res: captured.update(w=res[1].detach()))
    inputs = {"x": leaf(torch.randn(2, 5, 8))}
    out = m(inputs["x"])
    grad_out = torch.randn(out.shape)
    out.backward(grad_out)
    meta = {"kind": "conv_attention", "embed_dim": 8, "num_heads": 2, "kernel_size": 3}
    seed_named = [(n, p.detach()) for n, p in m.named_parameters()]
    seed_grads = [(n, p.grad) for n, p in m.named_parameters()]
    for name, values, grads in (
            ("conv_attention_seed", seed_named, seed_grads),
            ("conv_attention", torch_mha_names(seed_named, "attention."),
             torch_mha_names(seed_grads, "attention."))):
        tensors = {"x": inputs["x"].detach()}
        tensors.update(dict(values))
        tensors.update({"out": out.detach(), "weights": captured["w"], "grad_out": grad_out,
                        "grad.x": inputs["x"].grad})
        tensors.update({"grad." + n: g for n, g in grads})
        for n, t in tensors.items():
            assert torch.isfinite(t).all(), n
        write_safetensors(os.path.join(OUT_DIR, "mech_%s.safetensors" % name), tensors,
                          dict(meta, naming="seed" if name.endswith("seed") else "torch"))


# The literal input of seed 002, section 1.2 (batch 1, 4 tokens, embedding 8).
SEED_X = [[[1.0, 0.5, 0.8, 2.0, 0.1, 1.5, 0.3, 1.2],
           [0.7, 1.2, 0.4, 1.8, 0.9, 0.6, 1.1, 0.2],
           [1.3, 0.3, 1.7, 0.6, 1.4, 0.8, 0.5, 1.9],
           [0.2, 1.5, 1.1, 0.7, 0.3, 1.8, 1.6, 0.4]]]


def mha_seed_names_case():
    name = "mha_seed_names"
    seed(name)
    m = MultiHeadAttention(8, 2)
    x = torch.tensor(SEED_X)
    inputs = {"q": leaf(x), "k": leaf(x), "v": leaf(x)}
    out, weights = m(inputs["q"], inputs["k"], inputs["v"])
    save(name, inputs, list(m.named_parameters()), {}, out, weights.detach(),
         {"kind": "mha_seed", "embed_dim": 8, "num_heads": 2, "batch_first": 1})


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    additive_case("additive_lens_batch", per_query=False)
    additive_case("additive_lens_query", per_query=True)
    nw_case("nw_learned", learned=True)
    nw_case("nw_fixed", learned=False)
    linear_case("linear_efficient")
    linear_case("linear_shen", shen=True)
    linear_case("linear_padding", padding=True)
    conv_attention_cases()
    mha_seed_names_case()


if __name__ == "__main__":
    main()
