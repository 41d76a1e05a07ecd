#!/usr/bin/python3
"""The next-token loss of a GPT-2 safetensors file (ringtrain export) on one window, in PyTorch.

  gpt2_torch_loss.py FILE HEADS TOKEN...

Loads FILE with the json+struct reader of safetensors_tool.py into torch tensors and runs GPT-2
as Hugging Face's GPT2LMHeadModel computes it, written out (no transformers here): Conv1D dense
layers y = x @ W + b with W {in, out}; pre-LayerNorm blocks (epsilon 1e-5), causal attention
scaled by 1/sqrt(C/H), GELU with the tanh approximation, logits = ln_f(x) @ wte^T. Prints two
numbers: the mean cross-entropy of tokens[1:] given tokens[:-1] (float64), and the same with
every attn.c_proj weight read the wrong way round (x @ W^T), a control that shows how far a
layout mistake moves the loss. Exit status 77 without PyTorch.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_tool  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP: no PyTorch for " + sys.executable)
    sys.exit(77)


def load(path):
    _, tensors = safetensors_tool.read(path)
    return {name: torch.tensor(safetensors_tool.floats(raw), dtype=torch.float64).reshape(shape)
            for name, (shape, raw) in tensors.items()}


def loss(w, heads, tokens, wrong_c_proj=False):
    ids = torch.tensor(tokens[:-1])
    targets = torch.tensor(tokens[1:])
    T = len(ids)
    C = w["wte.weight"].shape[1]
    d = C // heads
    conv1d = lambda x, name: x @ w[name + ".weight"] + w[name + ".bias"]  # noqa: E731
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    layer = 0
    while f"h.{layer}.ln_1.weight" in w:
        p = f"h.{layer}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        q, k, v = conv1d(h, p + "attn.c_attn").split(C, dim=-1)
        q, k, v = (t.reshape(T, heads, d).transpose(0, 1) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~causal, float("-inf"))
        a = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(T, C)
        proj = w[p + "attn.c_proj.weight"]
        x = x + (a @ (proj.t() if wrong_c_proj else proj)) + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        x = x + conv1d(F.gelu(conv1d(h, p + "mlp.c_fc"), approximate="tanh"), p + "mlp.c_proj")
        layer += 1
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return F.cross_entropy(x @ w["wte.weight"].t(), targets).item()


def main(argv):
    weights = load(argv[1])
    heads = int(argv[2])
    tokens = [int(t) for t in argv[3:]]
    print(f"{loss(weights, heads, tokens):.6f} {loss(weights, heads, tokens, True):.6f}")


if __name__ == "__main__":
    main(sys.argv)
