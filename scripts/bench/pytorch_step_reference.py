#!/usr/bin/python3
"""PyTorch reference for `model_step_perf`: one thread's training step of the mlp or the cnn.

The model of pytorch_ddp_reference.build_model (ringtrain's models/model_factory.cc), batch 64,
one thread, float32, on one fixed batch of random MNIST-shaped samples drawn from a fixed seed.
Two steps are timed, their rounds interleaved as model_step_perf interleaves its variants:
  forward+backward       zero_grad, forward, cross-entropy, backward (what model_step_perf times)
  forward+backward+sgd   the same and SGD with momentum 0.9 (what a training step adds)
Each runs --repeats rounds of at least --seconds after 3 untimed steps; prints one table line
and one JSON line per step (median and best ms per step, and the median CPU time of the process
per step, which leaves out other processes' turns on the core), with GFLOP/s counted as ringtrain's
Model::trainingFlopsPerSample does: the convolutions' and linear layers' products only, forward
plus the two backward products, without the input gradient of the first layer.

  /usr/bin/python3 scripts/bench/pytorch_step_reference.py --model cnn --repeats 5

Needs Debian's python3-torch (PyTorch 1.13), hence /usr/bin/python3 above.
"""
import argparse
import json
import os
import statistics
import sys
import time

from pytorch_ddp_reference import INPUT_SHAPE, build_model


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--hidden", default="512,512", help="mlp: hidden sizes")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seconds", type=float, default=1.0, help="least time per round")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds of each step")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def training_flops_per_sample(torch, nn, model, shape):
    """2 x multiply-adds of the products, forward, weight and input gradients (none for the
    first layer, whose input is data), as ringtrain counts them."""
    forward = []

    def hook(module, inputs, output):
        if isinstance(module, nn.Linear):
            forward.append(2 * module.in_features * module.out_features)
        elif isinstance(module, nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1]
            pixels = output.shape[2] * output.shape[3]
            forward.append(2 * module.in_channels * module.out_channels * k * pixels)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in handles:
        h.remove()
    return 3 * sum(forward) - forward[0]


def main():
    args = parse_args()
    if args.batch < 1 or args.repeats < 1 or args.seconds <= 0:
        print("pytorch_step_reference.py: --batch, --repeats and --seconds must be positive",
              file=sys.stderr)
        return 2
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.nn as nn
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    torch.manual_seed(args.seed)
    hidden = [int(h) for h in args.hidden.split(",")]
    model = build_model(nn, args.model, hidden)
    shape = INPUT_SHAPE[args.model]
    flops = training_flops_per_sample(torch, nn, model, shape) * args.batch
    g = torch.Generator().manual_seed(args.seed)
    x = torch.rand(args.batch, *shape, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step(sgd):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        if sgd:
            opt.step()

    variants = {"forward+backward": False, "forward+backward+sgd": True}
    times = {name: [] for name in variants}
    cpu_times = {name: [] for name in variants}
    for sgd in variants.values():
        for _ in range(3):
            step(sgd)
    for _ in range(args.repeats):
        for name, sgd in variants.items():
            start, cpu_start, count = time.perf_counter(), time.process_time(), 0
            while True:
                step(sgd)
                count += 1
                elapsed = time.perf_counter() - start
                if elapsed >= args.seconds:
                    break
            times[name].append(elapsed / count)
            cpu_times[name].append((time.process_time() - cpu_start) / count)
    for name, t in times.items():
        median, best = statistics.median(t), min(t)
        print(f"pytorch {torch.__version__} {args.model} {name}, batch {args.batch}, one thread: "
              f"{median * 1e3:.3f} ms/step (best {best * 1e3:.3f}), "
              f"{flops / median * 1e-9:.1f} GFLOP/s", flush=True)
        print(json.dumps({"what": f"{args.model} {name}", "torch": torch.__version__,
                          "batch": args.batch, "median_ms": median * 1e3, "best_ms": best * 1e3,
                          "gflops": flops / median * 1e-9, "flops_per_step": flops,
                          "median_cpu_ms": statistics.median(cpu_times[name]) * 1e3}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
