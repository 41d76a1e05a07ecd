"""Horovod's PyTorch synthetic benchmark on ringtrain: the same script with the import changed
(`import ringtrain.torch as hvd`), on CPUs. Trains a model on one random batch over and over and
prints img/sec per rank and in total as "mean +-1.96 sigma", as Horovod's does.

    mpirun -np 2 python3 examples/pytorch_synthetic_benchmark.py --model resnet50

--mode picks how the gradients are averaged: ringtrain's DistributedOptimizer (Horovod's way),
DistributedDataParallel with ringtrain's communication hook, DDP on torch.distributed's backend
"ringtrain" (no hook), DDP with gloo's all-reduce, or not at all (local: each rank trains alone; with one rank, the reference that scaling is measured against).
Models: examples/pytorch_models.py (resnet50 needs python3-torchvision).
"""
import argparse
import os
import timeit

import numpy as np
import torch
import torch.nn.functional as F

import pytorch_models
import ringtrain.torch as hvd

MODES = ("optimizer", "ddp-hook", "ddp-gloo", "ddp-ringtrain", "local")


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a whole number of at least 1")
    return value


def arguments():
    parser = argparse.ArgumentParser(description="PyTorch synthetic benchmark on ringtrain")
    parser.add_argument("--model", default="resnet50", choices=sorted(pytorch_models.MODELS))
    parser.add_argument("--batch-size", type=positive, default=32, help="per rank")
    parser.add_argument("--num-warmup-batches", type=positive, default=10)
    parser.add_argument("--num-batches-per-iter", type=positive, default=10)
    parser.add_argument("--num-iters", type=positive, default=10)
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="gradients cross the wire in float16")
    parser.add_argument("--mode", default="optimizer", choices=MODES,
                        help="optimizer: hvd.DistributedOptimizer; ddp-hook: DDP with "
                             "hvd.allreduce_hook; ddp-ringtrain: DDP on the backend \"ringtrain\"; "
                             "ddp-gloo: DDP with gloo's all-reduce; local: no averaging")
    parser.add_argument("--bucket-view", action="store_true",
                        help="DDP: gradients as views of its buckets (gradient_as_bucket_view), "
                             "with no copies into the buckets and back")
    parser.add_argument("--image-size", type=positive, default=224,
                        help="resnet50: the side of its images (224 as in Horovod's)")
    parser.add_argument("--threads", type=positive, default=None,
                        help="torch threads per rank (default: the cores / the ranks per node)")
    return parser.parse_args()


def distributed(model, optimizer, args):
    """The model and optimizer whose step() averages the gradients in args.mode's way."""
    if args.mode == "local":
        return model, optimizer
    if args.mode == "optimizer":
        compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             compression=compression)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        return model, optimizer
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    if args.mode == "ddp-ringtrain":
        torch.distributed.init_process_group("ringtrain")  # the backend: DDP unchanged
    else:
        hvd.init_process_group()  # gloo, beside the hook
    # broadcasts rank 0's parameters
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    gradient_as_bucket_view=args.bucket_view)
    if args.mode == "ddp-hook":
        hook = hvd.allreduce_hook
        ddp.register_comm_hook(None, default_hooks.fp16_compress_wrapper(hook)
                               if args.fp16_allreduce else hook)
    elif args.fp16_allreduce:
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return ddp, optimizer


def main():
    args = arguments()
    hvd.init()
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // hvd.local_size()))
    torch.manual_seed(hvd.rank())
    model, batch = pytorch_models.build(args.model, args.batch_size, args.image_size)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad],
                                lr=0.01 * hvd.size())
    model, optimizer = distributed(model, optimizer, args)
    data, target = batch()

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    def log(text):
        if hvd.rank() == 0:
            print(text, flush=True)

    log(f"Model: {args.model} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
        f"parameters), mode: {args.mode}")
    log(f"Batch size: {args.batch_size}")
    log(f"Number of CPUs: {hvd.size()} ({torch.get_num_threads()} threads each)")
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log(f"Iter #{x}: {img_sec:.1f} img/sec per CPU")
        img_secs.append(img_sec)
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log(f"Img/sec per CPU: {img_sec_mean:.1f} +-{img_sec_conf:.1f}")
    log(f"Total img/sec on {hvd.size()} CPU(s): {hvd.size() * img_sec_mean:.1f} "
        f"+-{hvd.size() * img_sec_conf:.1f}")
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
