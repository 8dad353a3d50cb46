#!/usr/bin/python3
"""Writes Hugging Face folders (config.json, model.safetensors) and what PyTorch computes with them,
for tests/test_lm_hf.c: tests/golden/hf_<case>/ and tests/golden/hf_<case>.safetensors.

Run from the repository root with Debian's interpreter (torch 1.13 imports only there; Debian 12
has no transformers package):
    /usr/bin/python3 tests/golden/make_golden_hf.py

The folders are laid out from the transformers library's documented layouts, not by attn:
GPT2LMHeadModel ("transformer." names, Conv1D weights stored (in, out), the causal-mask buffers
"attn.bias" older versions saved, lm_head tied and left out) and LlamaForCausalLM
("model.layers.N.self_attn.q_proj.weight", ..., gate/up/down_proj, lm_head.weight when untied),
with the config.json fields each model reads; "gpt2_bare" saves GPT2Model's names (no
"transformer."). The models are make_golden_lm.py's compositions (Llama with HF's rotate_half, GQA),
in float64 on the float32 weights. Each .safetensors holds ids, targets (one sequence), logits,
loss (mean cross-entropy) and every gradient under attn's names (Linear (out, in)) as grad.<name>.
Deterministic: torch.manual_seed(crc32(name)).
"""
import json
import os
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_lm import gpt2_forward, gpt2_params, llama_forward, llama_params  # noqa: E402
from safetensors_writer import write_safetensors  # noqa: E402

OUT_DIR = os.path.join("tests", "golden")
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
LLAMA_NAMES = {"attention_norm": "input_layernorm", "attention.wq": "self_attn.q_proj",
               "attention.wk": "self_attn.k_proj", "attention.wv": "self_attn.v_proj",
               "attention.wo": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
               "feed_forward.w1": "mlp.gate_proj", "feed_forward.w3": "mlp.up_proj",
               "feed_forward.w2": "mlp.down_proj"}


def hf_gpt2(p, T, bare):
    out = {}
    for k, v in p.items():
        if k.endswith(CONV1D):
            v = v.t()
        out[k[len("transformer."):] if bare else k] = v.float().contiguous()
    n_layer = sum(1 for k in p if k.endswith(".ln_1.weight"))
    for i in range(n_layer):  # the causal-mask buffers transformers before 4.27 saved
        out[f"{'' if bare else 'transformer.'}h.{i}.attn.bias"] = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
    return out


def hf_llama(p):
    out = {}
    for k, v in p.items():
        if k == "tok_embeddings.weight":
            name = "model.embed_tokens.weight"
        elif k == "norm.weight":
            name = "model.norm.weight"
        elif k == "output.weight":
            name = "lm_head.weight"
        else:
            _, i, kind = k.split(".", 2)
            name = f"model.layers.{i}.{LLAMA_NAMES[kind[:-len('.weight')]]}.weight"
        out[name] = v.float().contiguous()
    return out


def write_case(name, style, V, T, E, L, H, Hkv, F, eps, base, untied, n, bare=False):
    torch.manual_seed(zlib.crc32(("hf_" + name).encode()))
    rnd = lambda *shape: (torch.randn(*shape) * 0.3).double()  # noqa: E731
    p32 = gpt2_params(V, T, E, L, F, rnd) if style == "gpt2" else llama_params(V, E, L, H, Hkv, F, untied, rnd)
    p = {k: v.float().double().requires_grad_() for k, v in p32.items()}
    seq = torch.randint(0, V, (n + 1,))
    ids, targets = seq[:-1], seq[1:]
    if style == "gpt2":
        logits = gpt2_forward(p, ids, L, H, eps)
        config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": T,
                  "n_ctx": T, "n_embd": E, "n_layer": L, "n_head": H, "n_inner": None if F == 4 * E else F,
                  "activation_function": "gelu_new", "layer_norm_epsilon": eps, "resid_pdrop": 0.1,
                  "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02, "scale_attn_weights": True,
                  "use_cache": True, "bos_token_id": V - 1, "eos_token_id": V - 1, "torch_dtype": "float32",
                  "transformers_version": "4.26.0"}
        tensors = hf_gpt2(p, T, bare)
    else:
        logits = llama_forward(p, ids, L, H, Hkv, eps, base, False)
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
                  "max_position_embeddings": T, "hidden_size": E, "intermediate_size": F, "num_hidden_layers": L,
                  "num_attention_heads": H, "num_key_value_heads": Hkv, "hidden_act": "silu", "rms_norm_eps": eps,
                  "rope_theta": base, "rope_scaling": None, "attention_bias": False, "attention_dropout": 0.0,
                  "mlp_bias": False, "tie_word_embeddings": not untied, "pretraining_tp": 1, "bos_token_id": 1,
                  "eos_token_id": 2, "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32",
                  "transformers_version": "4.40.0"}
        tensors = hf_llama(p)
    loss = torch.nn.functional.cross_entropy(logits, targets)
    loss.backward()
    folder = os.path.join(OUT_DIR, f"hf_{name}")
    os.makedirs(folder, exist_ok=True)
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors, {"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    golden = {"ids": ids, "targets": targets, "logits": logits.detach().float(), "loss": loss.detach().float()}
    golden.update({f"grad.{k}": v.grad.float() for k, v in p.items()})
    write_safetensors(os.path.join(OUT_DIR, f"hf_{name}.safetensors"), golden, {"style": style})
    print(f"hf_{name}: {len(p)} parameters, {n} tokens, loss {loss.item():.6f}")


if __name__ == "__main__":
    # name: style, V, T, E, layers, H, Hkv, F, eps, rope theta, untied, tokens
    write_case("gpt2", "gpt2", 41, 16, 32, 2, 4, 4, 128, 1e-5, 0.0, False, 13)
    write_case("gpt2_bare", "gpt2", 29, 12, 16, 1, 2, 2, 40, 1e-5, 0.0, False, 9, bare=True)
    write_case("llama", "llama", 43, 20, 32, 2, 4, 2, 96, 1e-6, 500000.0, True, 15)
    write_case("llama_tied", "llama", 31, 10, 24, 2, 3, 1, 64, 1e-5, 10000.0, False, 10)
