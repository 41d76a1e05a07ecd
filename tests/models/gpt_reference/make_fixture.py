#!/usr/bin/python3
"""Writes gpt_tiny.fixture: a tiny GPT-2's weights, a batch, the loss and the gradients (PyTorch).

The reference that tests/models/gpt_reference_test.cc matches ringtrain's GPT against, the way
llm.c checks its C trainer against a PyTorch run. Run by hand (not by the tests), with Debian's
PyTorch, whenever the fixture must change:

  /usr/bin/python3 tests/models/gpt_reference/make_fixture.py

The model is written here from the GPT-2 architecture, in float64, with plain tensors (no
torch.nn modules, no Hugging Face code): token plus position embeddings; L pre-LayerNorm blocks,
each x += c_proj(attention(c_attn(ln_1(x)))) with causal softmax attention scaled by
1/sqrt(C/H), then x += mlp.c_proj(gelu_tanh(mlp.c_fc(ln_2(x)))); ln_f; logits = ln_f(x) wte^T
(the head tied to the token embedding); the mean cross-entropy of the next token over all B*T
positions. LayerNorm's epsilon is 1e-5. Autograd gives the gradients; the wte gradient is the
sum of the embedding's and the head's contributions because both read the one tensor.

The weights are seeded random values, larger than GPT-2's 0.02 initialisation (std 0.2, biases
std 0.1, LayerNorm weights 1 + 0.1 noise) so that every path carries signal. Each parameter is
rounded to 9 significant digits *before* the run, so the decimal text in the fixture is exactly
the set of doubles PyTorch computed with (C++'s correctly rounded parsing gives the same bits).

Fixture format (text, whitespace-separated; '#' starts a comment line):

  ringtrain-gpt-fixture 1
  config <layers> <heads> <width> <context> <vocabulary> <batch>
  tokens <B*T>        then B*T token ids, sample after sample, position after position
  targets <B*T>       then the next-token ids in the same order
  loss <value>
  param <name> <rank> <dim...>   then the values, row-major (C order)
  ... one param record per tensor, in ringtrain's order and under ringtrain's names ...
  grad <name> <rank> <dim...>    then d loss / d param, same layout
  ... one grad record per tensor, same order ...
  end

Names and layouts are ringtrain's (models/transformer_block.h, models/gpt_layers.h): dense
weights {out, in} as torch.nn.Linear keeps them (not Hugging Face's transposed Conv1D);
"h.<l>.attn.c_attn.weight" {3C, C} has the queries' rows, then the keys', then the values', head
h in rows h*C/H ... (h+1)*C/H - 1 of each. Gradients are printed with 17 significant digits.
"""
import argparse
import math
import os
import sys

LAYERS, HEADS, WIDTH, CONTEXT, VOCAB, BATCH = 2, 2, 16, 8, 37, 3
SEED = 20240520
EPSILON = 1e-5


def parameter_shapes(L, C, T, V):
    """ringtrain's parameter table for the GPT: (name, shape, kind), in buffer order."""
    shapes = [("wte.weight", (V, C), "embedding"), ("wpe.weight", (T, C), "embedding")]
    for l in range(L):
        p = f"h.{l}."
        shapes += [
            (p + "ln_1.weight", (C,), "ln_weight"), (p + "ln_1.bias", (C,), "bias"),
            (p + "attn.c_attn.weight", (3 * C, C), "weight"),
            (p + "attn.c_attn.bias", (3 * C,), "bias"),
            (p + "attn.c_proj.weight", (C, C), "weight"), (p + "attn.c_proj.bias", (C,), "bias"),
            (p + "ln_2.weight", (C,), "ln_weight"), (p + "ln_2.bias", (C,), "bias"),
            (p + "mlp.c_fc.weight", (4 * C, C), "weight"), (p + "mlp.c_fc.bias", (4 * C,), "bias"),
            (p + "mlp.c_proj.weight", (C, 4 * C), "weight"), (p + "mlp.c_proj.bias", (C,), "bias"),
        ]
    shapes += [("ln_f.weight", (C,), "ln_weight"), ("ln_f.bias", (C,), "bias")]
    return shapes


def random_parameters(torch, shapes, generator):
    params = {}
    for name, shape, kind in shapes:
        noise = torch.randn(shape, generator=generator, dtype=torch.float64)
        if kind == "ln_weight":
            value = 1.0 + 0.1 * noise
        elif kind == "bias":
            value = 0.1 * noise
        else:
            value = 0.2 * noise
        # Round to 9 significant digits, so that the text written is exactly what ran.
        value = torch.tensor([float(f"{v:.9g}") for v in value.flatten().tolist()],
                             dtype=torch.float64).reshape(shape)
        params[name] = value.requires_grad_(True)
    return params


def gpt_loss(torch, params, tokens, targets, L, H):
    """The mean next-token cross-entropy of GPT-2 on tokens {B, T}, targets {B, T}."""
    F = torch.nn.functional
    B, T = tokens.shape
    wte = params["wte.weight"]
    C = wte.shape[1]
    d = C // H
    x = wte[tokens] + params["wpe.weight"][:T]  # {B, T, C}
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = lambda n: params[f"h.{l}.{n}"]
        h = F.layer_norm(x, (C,), p("ln_1.weight"), p("ln_1.bias"), EPSILON)
        qkv = F.linear(h, p("attn.c_attn.weight"), p("attn.c_attn.bias"))  # {B, T, 3C}
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.reshape(B, T, H, d).transpose(1, 2) for t in (q, k, v))  # {B, H, T, d}
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)  # {B, H, Tq, Tk}
        scores = scores.masked_fill(~causal, float("-inf"))
        attention = torch.softmax(scores, dim=-1) @ v  # {B, H, T, d}
        attention = attention.transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(attention, p("attn.c_proj.weight"), p("attn.c_proj.bias"))
        h = F.layer_norm(x, (C,), p("ln_2.weight"), p("ln_2.bias"), EPSILON)
        h = F.gelu(F.linear(h, p("mlp.c_fc.weight"), p("mlp.c_fc.bias")), approximate="tanh")
        x = x + F.linear(h, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
    x = F.layer_norm(x, (C,), params["ln_f.weight"], params["ln_f.bias"], EPSILON)
    logits = x @ wte.t()  # the head tied to the token embedding
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T), reduction="mean")


def write_values(out, values, fmt, per_line=8):
    for i in range(0, len(values), per_line):
        out.write(" ".join(fmt.format(v) for v in values[i:i + per_line]) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join(here, "gpt_tiny.fixture"))
    args = parser.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"make_fixture.py: no PyTorch for {sys.executable} ({e}); "
              "apt-get install python3-torch", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(SEED)

    shapes = parameter_shapes(LAYERS, WIDTH, CONTEXT, VOCAB)
    params = random_parameters(torch, shapes, generator)
    # Windows of T+1 tokens: the first T are the input, the last T the next-token targets.
    windows = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1), generator=generator)
    tokens, targets = windows[:, :-1], windows[:, 1:]

    loss = gpt_loss(torch, params, tokens, targets, LAYERS, HEADS)
    loss.backward()

    with open(args.output, "w") as out:
        out.write("# Written by make_fixture.py (PyTorch %s, float64); format in its docstring.\n"
                  % torch.__version__)
        out.write("ringtrain-gpt-fixture 1\n")
        out.write(f"config {LAYERS} {HEADS} {WIDTH} {CONTEXT} {VOCAB} {BATCH}\n")
        for key, ids in (("tokens", tokens), ("targets", targets)):
            out.write(f"{key} {ids.numel()}\n")
            write_values(out, ids.flatten().tolist(), "{}", per_line=CONTEXT)
        out.write(f"loss {loss.item():.17g}\n")
        for record, fmt in (("param", "{:.9g}"), ("grad", "{:.17g}")):
            for name, shape, _ in shapes:
                tensor = params[name] if record == "param" else params[name].grad
                dims = " ".join(str(s) for s in shape)
                out.write(f"{record} {name} {len(shape)} {dims}\n")
                write_values(out, tensor.detach().flatten().tolist(), fmt)
        out.write("end\n")
    count = sum(params[n].numel() for n, _, _ in shapes)
    print(f"{args.output}: {count} parameters, loss {loss.item():.17g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
