#!/usr/bin/python3
"""PyTorch DDP (gloo) reference for `ringtrain train --synthetic` on CPUs.

The same job as ringtrain's throughput benchmark, in PyTorch: the MLP 784-512-512-10 (or the
--hidden sizes) or, with --model cnn, ringtrain's LeNet-style CNN (build_model); batch 64 per
rank, one thread per rank, SGD with momentum 0.9, softmax cross-entropy, on 60,000 random
MNIST-shaped samples held in memory, each epoch a permutation shared by all ranks and cut into
disjoint shards. Gradients are averaged by DistributedDataParallel over gloo (its defaults:
25 MiB buckets, overlap with backward); with one rank the model trains without DDP, as
ringtrain's one rank trains without an exchange.
With --precision bf16 the forward runs under torch.autocast("cpu", dtype=torch.bfloat16).

Started by mpirun, as ringtrain is, so that both are placed on the cores the same way; the rank
and the number of ranks come from Open MPI's environment and the ranks meet in a file
(rendezvous.py: --rendezvous FILE, or one named after the mpirun job):

  mpirun -np 2 --bind-to core /usr/bin/python3 scripts/bench/pytorch_ddp_reference.py --steps 1500

Rank 0 prints one line in the form ringtrain's summary has ("... N samples/s (...)", which
scripts/bench/scaling_efficiency.sh reads) and, with --json, a JSON object. The time runs from a
barrier after --warmup steps to a barrier after the last step. Needs Debian's python3-torch
(PyTorch 1.13, built with gloo), hence /usr/bin/python3 above.
"""
import argparse
import json
import os
import sys
import time

import rendezvous


# What one sample looks like to each model: flat pixels for the mlp, an image for the cnn.
INPUT_SHAPE = {"mlp": (784,), "cnn": (1, 28, 28)}


def build_model(nn, name, hidden):
    """ringtrain's models/model_factory.cc in PyTorch: the mlp 784-HIDDEN-10, or the cnn (conv 5x5
    16 channels, same padding, ReLU, 2x2 max-pool, conv 5x5 32 channels, ReLU, 2x2 max-pool,
    linear 1568-128, ReLU, linear 128-10; 215,370 parameters)."""
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    layers, width = [], 784
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def model_label(name, hidden):
    return "cnn" if name == "cnn" else f"mlp 784-{'-'.join(map(str, hidden))}-10"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp", help="as ringtrain's --model")
    p.add_argument("--hidden", default="512,512", help="mlp: hidden sizes, as ringtrain's --hidden")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=1500, help="timed steps")
    p.add_argument("--warmup", type=int, default=50, help="untimed steps before them")
    p.add_argument("--samples", type=int, default=60000, help="synthetic training samples")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--rendezvous", metavar="FILE",
                   help="a new file where the ranks meet (default: named after the mpirun job)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward under torch.autocast('cpu', dtype=torch.bfloat16), as "
                        "ringtrain's --precision bf16")
    p.add_argument("--json", help="rank 0 writes the result here")
    return p.parse_args()


def main():
    args = parse_args()
    try:
        hidden = [int(h) for h in args.hidden.split(",")]
        if not hidden or min(hidden) < 1:
            raise ValueError
    except ValueError:
        print(f"pytorch_ddp_reference.py: --hidden '{args.hidden}': expected sizes like 512,512",
              file=sys.stderr)
        return 2
    if args.batch_size < 1 or args.steps < 1 or args.warmup < 0:
        print("pytorch_ddp_reference.py: --batch-size and --steps must be at least 1, "
              "--warmup at least 0", file=sys.stderr)
        return 2
    # One thread per rank, BLAS included (Debian's OpenBLAS would start one per core).
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        import torch
        import torch.distributed as dist
        import torch.nn as nn
    except ImportError as e:
        print(f"pytorch_ddp_reference.py: no PyTorch for {sys.executable} ({e}); "
              "apt-get install python3-torch", file=sys.stderr)
        return 2

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    torch.manual_seed(args.seed)

    model = build_model(nn, args.model, hidden)
    if ranks > 1:
        dist.init_process_group("gloo", init_method=rendezvous.init_method(args.rendezvous),
                                rank=rank, world_size=ranks)
        # DDP broadcasts rank 0's parameters, as ringtrain does.
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    g = torch.Generator().manual_seed(args.seed)
    images = torch.rand(args.samples, *INPUT_SHAPE[args.model], generator=g)
    labels = torch.randint(0, 10, (args.samples,), generator=g)
    per_rank = args.samples // ranks
    steps_per_epoch = per_rank // args.batch_size
    state = {"epoch": -1, "order": None, "step": 0}

    def next_batch():
        if state["step"] % steps_per_epoch == 0:
            state["epoch"] += 1
            perm = torch.randperm(args.samples, generator=torch.Generator().manual_seed(
                args.seed * 1000003 + state["epoch"]))
            state["order"] = perm[rank * per_rank:(rank + 1) * per_rank]
        i = state["step"] % steps_per_epoch
        state["step"] += 1
        idx = state["order"][i * args.batch_size:(i + 1) * args.batch_size]
        return images.index_select(0, idx), labels.index_select(0, idx)

    def step():
        x, y = next_batch()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def barrier():
        if ranks > 1:
            dist.barrier()

    for _ in range(args.warmup):
        step()
    barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    barrier()
    seconds = time.perf_counter() - start
    total = ranks * args.batch_size * args.steps / seconds
    if rank == 0:
        result = {"framework": "pytorch-ddp-gloo", "torch": torch.__version__, "ranks": ranks,
                  "model": args.model, "hidden": hidden, "precision": args.precision,
                  "batch_per_rank": args.batch_size, "steps": args.steps,
                  "seconds": seconds, "samples_per_second": total,
                  "samples_per_second_per_rank": total / ranks, "final_loss": float(loss)}
        print(f"pytorch {torch.__version__} {args.precision} DDP (gloo), {ranks} rank(s), "
              f"{model_label(args.model, hidden)}, batch {args.batch_size} per rank: "
              f"{args.steps} steps in {seconds:.3f} s, {total:.0f} samples/s "
              f"({total / ranks:.0f} per rank)", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    if ranks > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
