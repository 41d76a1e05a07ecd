#!/usr/bin/env python3
"""PyTorch reference for ringtrain's one-GPU training throughput (issue: GPUs).

Trains the same models as `ringtrain train --model mlp|cnn` (same layers, He/Xavier-style init,
softmax cross-entropy, SGD with momentum 0.9) on random MNIST-shaped batches that start in host
memory, as ringtrain's do, and prints samples per second. It also measures the device's copy
bandwidth (device to device, bytes read + written; host to device from pinned memory), the
ceilings the GPU numbers are read against.

  python3 scripts/bench/pytorch_gpu_reference.py --batch 64 256 1024 --json out.json

Timing: CUDA events around `--steps` steps after `--warmup` steps, median of `--repeats`.
PyTorch runs at its documented best for fixed shapes: `torch.backends.cudnn.benchmark` on (cuDNN
times its algorithms, as ringtrain's cuDNN path does); `--cudnn-benchmark off` for its default.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn as nn


def mlp(hidden):
    layers, width = [], 784
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(nn.Flatten(), *layers)


def cnn():
    # ringtrain's cnn: conv 16@5x5 same, relu, pool 2, conv 32@5x5 same, relu, pool 2, fc 128, fc 10
    return nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def time_region(fn, warmup, iters, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / iters)
    return statistics.median(times)


def train_throughput(name, model, batch, args):
    device = torch.device("cuda")
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # Several host batches in pinned memory, rotated, copied asynchronously like a data loader.
    g = torch.Generator().manual_seed(1)
    host_x = [torch.rand(batch, 1, 28, 28, generator=g).pin_memory() for _ in range(4)]
    host_y = [torch.randint(0, 10, (batch,), generator=g).pin_memory() for _ in range(4)]
    state = {"i": 0}

    def step():
        i = state["i"] = (state["i"] + 1) % 4
        x = host_x[i].to(device, non_blocking=True)
        y = host_y[i].to(device, non_blocking=True)
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    seconds = time_region(step, args.warmup, args.steps, args.repeats)
    return {"model": name, "batch": batch, "tf32": torch.backends.cuda.matmul.allow_tf32,
            "step_ms": seconds * 1e3, "samples_per_s": batch / seconds}


def copy_bandwidth(args):
    n = 1 << 28  # 1 GiB of bytes
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    d2d = time_region(lambda: b.copy_(a), 3, 20, args.repeats)
    h = torch.empty(n, dtype=torch.uint8).pin_memory()
    h2d = time_region(lambda: b.copy_(h, non_blocking=True), 2, 5, args.repeats)
    return {"d2d_GBps_read_plus_write": 2 * n / d2d / 1e9, "h2d_pinned_GBps": n / h2d / 1e9,
            "bytes": n}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--models", nargs="+", default=["mlp", "cnn"])
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cudnn-benchmark", choices=["on", "off"], default="on")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("pytorch_gpu_reference.py: no GPU visible to PyTorch", file=sys.stderr)
        return 2
    hidden = [int(h) for h in args.hidden.split(",")]
    torch.backends.cudnn.benchmark = args.cudnn_benchmark == "on"
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "cudnn_benchmark": args.cudnn_benchmark,
           "runs": []}
    out["copy"] = copy_bandwidth(args)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        for name in args.models:
            for batch in args.batch:
                torch.manual_seed(0)
                model = mlp(hidden) if name == "mlp" else cnn()
                out["runs"].append(train_throughput(name, model, batch, args))
    print(f"# PyTorch {out['torch']} on {out['gpu']}, cuDNN {out['cudnn']}, "
          f"cudnn.benchmark {args.cudnn_benchmark}")
    c = out["copy"]
    print(f"# copy bandwidth: device-to-device {c['d2d_GBps_read_plus_write']:.0f} GB/s (read+write), "
          f"host-to-device pinned {c['h2d_pinned_GBps']:.1f} GB/s")
    print(f"{'model':6} {'batch':>6} {'tf32':>5} {'step ms':>9} {'samples/s':>12}")
    for r in out["runs"]:
        print(f"{r['model']:6} {r['batch']:>6} {str(r['tf32']):>5} {r['step_ms']:>9.3f} "
              f"{r['samples_per_s']:>12.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
