#!/usr/bin/python3
"""PyTorch speed reference for ringtrain's GPT: training tokens/s on one thread.

The same model as `ringtrain train --model gpt` (gpt-mini by default: 4 layers, 4 heads, width
256, context 128, vocabulary 50257), batch 8, one thread, float32: token and position
embeddings, pre-LayerNorm blocks (one c_attn projection, causal softmax attention, c_proj; MLP
4C wide with GELU's tanh approximation), ln_f, the head tied to the token embedding, the mean
next-token cross-entropy. GPT-2's initialisation from a fixed seed (normal 0.02, the residual
projections c_proj 0.02/sqrt(2L), biases 0, LayerNorms 1 and 0) and AdamW (lr 3e-4, betas 0.9
and 0.95, weight decay 0.1 on the matrices only), as ringtrain trains it. A step is zero_grad,
forward, backward and the AdamW step; the batches are random token windows drawn from a fixed
seed before the timing. --warmup steps run first, untimed.

  /usr/bin/python3 scripts/bench/gpt_pytorch_reference.py --steps 20 --warmup 3

Prints one table line and one JSON line (also written to --json FILE): tokens/s over the timed
steps (wall time; the process's CPU time beside it shows whether the core was shared) and the
model FLOP/s, counted as ringtrain's Model::trainingFlopsPerSample does: the matrix products
only, forward plus the two backward products (3x forward), per sample
L·(24·T·C² + 4·T²·C) for the blocks (attention over the full T×T) plus 2·V·C·T for the head.
Needs Debian's python3-torch (PyTorch 1.13), hence /usr/bin/python3 above.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time


def add_run_arguments(p):
    """The model's shape (gpt-mini's by default), the batch, the steps and the seed."""
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=8, help="sequences per step (per rank)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward under torch.autocast('cpu', dtype=torch.bfloat16), as "
                        "ringtrain's --precision bf16 (bfloat16 products, float32 weights)")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(p)
    p.add_argument("--threads", type=int, default=1, help="torch threads (the reference is 1)")
    p.add_argument("--json", help="also write the result here")
    return p.parse_args()


def model_flops_per_sample(L, C, T, V):
    """Matrix-product FLOPs of one sequence's forward and backward, as ringtrain counts them."""
    block = 24 * T * C * C + 4 * T * T * C
    head = 2 * V * C * T
    return 3 * (L * block + head)


def build(torch, args):
    nn, F = torch.nn, torch.nn.functional
    L, H, C, T, V = args.layers, args.heads, args.width, args.context, args.vocab

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=1e-5)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=1e-5)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril().logical_not(),
                                 persistent=False)

        def forward(self, x):
            B, S, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, S, H, C // H).transpose(1, 2) for t in (q, k, v))
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            scores = scores.masked_fill(self.mask[:S, :S], float("-inf"))
            y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, C)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)

        def forward(self, tokens, targets):
            S = tokens.shape[1]
            x = self.wte(tokens) + self.wpe.weight[:S]
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied to the token embedding
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    torch.manual_seed(args.seed)
    model = Gpt()
    # GPT-2's initialisation: normal 0.02, the residual projections 0.02/sqrt(2L).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                p.normal_(0.0, 0.02 / math.sqrt(2 * L))
            elif p.dim() == 2:
                p.normal_(0.0, 0.02)
            elif ".ln_" in name or name.startswith("ln_f"):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            else:
                p.zero_()
    return model


# AdamW as ringtrain trains the GPT: lr 3e-4, betas 0.9/0.95, decay 0.1 on matrices only.
ADAMW_SETTINGS = {"lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-8}


def adamw_groups(model):
    """The parameter groups: the matrices decayed, the rest not."""
    matrices = [p for p in model.parameters() if p.dim() == 2]
    others = [p for p in model.parameters() if p.dim() != 2]
    return [{"params": matrices, "weight_decay": 0.1}, {"params": others, "weight_decay": 0.0}]


def adamw(torch, model):
    """AdamW as ringtrain trains the GPT (ADAMW_SETTINGS, adamw_groups)."""
    return torch.optim.AdamW(adamw_groups(model), **ADAMW_SETTINGS)


def train_step(model, optimizer, inputs, targets, precision="fp32"):
    """One timed step: zero_grad, forward (autocast to bfloat16 with precision bf16), backward,
    the AdamW step; returns the loss."""
    import torch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = model(inputs, targets)
    loss.backward()
    optimizer.step()
    return float(loss)


def emit(line, result, path):
    """The table line, the JSON line, and the JSON in `path` when one is given."""
    print(line, flush=True)
    print(json.dumps(result), flush=True)
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


def random_batches(torch, args, count, seed):
    """`count` batches of args.batch random windows of context+1 tokens: (inputs, targets)."""
    generator = torch.Generator().manual_seed(seed)
    windows = torch.randint(0, args.vocab, (count, args.batch, args.context + 1),
                            generator=generator)
    return windows[..., :-1].contiguous(), windows[..., 1:].contiguous()


def main():
    args = parse_args()
    if min(args.layers, args.heads, args.width, args.context, args.vocab, args.batch,
           args.steps, args.threads) < 1 or args.warmup < 0 or args.width % args.heads:
        print("gpt_pytorch_reference.py: sizes, --batch, --steps and --threads must be at least 1, "
              "--warmup at least 0, --width a multiple of --heads", file=sys.stderr)
        return 2
    # One thread, BLAS included (Debian's OpenBLAS would start one per core).
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    try:
        import torch
    except ImportError as e:
        print(f"gpt_pytorch_reference.py: no PyTorch for {sys.executable} ({e}); "
              "apt-get install python3-torch", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)

    model = build(torch, args)
    optimizer = adamw(torch, model)
    total = args.warmup + args.steps
    inputs, targets = random_batches(torch, args, total, args.seed + 1)

    def step(i):
        return train_step(model, optimizer, inputs[i], targets[i], args.precision)

    losses, times, cpu_times = [], [], []
    for i in range(total):
        start, cpu_start = time.perf_counter(), time.process_time()
        losses.append(step(i))
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    timed = times[args.warmup:]
    seconds = sum(timed)
    cpu_seconds = sum(cpu_times[args.warmup:])
    tokens = args.batch * args.context
    tokens_per_second = tokens * args.steps / seconds
    flops_per_step = model_flops_per_sample(args.layers, args.width, args.context,
                                            args.vocab) * args.batch
    parameters = sum(p.numel() for p in model.parameters())
    result = {
        "framework": "pytorch", "torch": torch.__version__, "threads": args.threads,
        "precision": args.precision,
        "layers": args.layers, "heads": args.heads, "width": args.width,
        "context": args.context, "vocab": args.vocab, "batch": args.batch,
        "parameters": parameters, "warmup": args.warmup, "steps": args.steps,
        "seconds": seconds, "cpu_seconds": cpu_seconds, "step_seconds_mean": seconds / args.steps,
        "step_seconds_median": statistics.median(timed),
        "tokens_per_second": tokens_per_second,
        "model_flops_per_step": flops_per_step,
        "model_flops_per_second": flops_per_step * args.steps / seconds,
        "first_loss": losses[0], "last_loss": losses[-1],
    }
    emit(f"pytorch {torch.__version__} {args.precision}, {args.threads} thread(s), gpt L{args.layers} "
         f"H{args.heads} C{args.width} T{args.context} V{args.vocab} "
         f"({parameters / 1e6:.2f}M parameters), batch {args.batch}: {args.steps} steps in "
         f"{seconds:.2f} s ({1e3 * seconds / args.steps:.0f} ms/step, median "
         f"{1e3 * statistics.median(timed):.0f}), {tokens_per_second:.0f} tokens/s, "
         f"{result['model_flops_per_second'] / 1e9:.1f} GFLOP/s; process CPU time "
         f"{100 * cpu_seconds / seconds:.0f}% of the wall time; loss {losses[0]:.4f} -> "
         f"{losses[-1]:.4f}", result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
