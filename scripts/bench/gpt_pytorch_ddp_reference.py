#!/usr/bin/python3
"""PyTorch DDP (gloo) reference for `ringtrain train --model gpt` on N ranks: training tokens/s.

The model, its initialisation, AdamW and the FLOP count are gpt_pytorch_reference.py's (imported
from beside this file, not copied): gpt-mini by default (4 layers, 4 heads, width 256, context
128, vocabulary 50257), --batch sequences per rank, one thread per rank, float32. Gradients are
averaged by DistributedDataParallel over gloo with its defaults (25 MiB buckets, overlap with
backward); with one rank the model trains without DDP, as ringtrain's one rank trains without an
exchange. Every rank draws its own random token windows (seed + rank) before the timing. --zero
shards the optimiser with torch.distributed.optim.ZeroRedundancyOptimizer (the same AdamW inside
it; on one rank too, in a process group of one).

Two ways to start it:
  mpirun -np 2 --bind-to core /usr/bin/python3 scripts/bench/gpt_pytorch_ddp_reference.py
      (rank and size from Open MPI's environment; placed on the cores as ringtrain is; what
      scripts/bench/model_speed.sh does)
  /usr/bin/python3 scripts/bench/gpt_pytorch_ddp_reference.py --nprocs 2 [--bind]
      (torch.multiprocessing.spawn; --bind pins rank r to CPU r modulo the CPUs it may use)
The ranks meet in a file (rendezvous.py): --rendezvous FILE, or one named after the mpirun job.

--warmup steps run first, untimed; the time runs from a barrier after them to a barrier after the
last step. Rank 0 prints one table line and one JSON line (also written to --json FILE): tokens/s
of the job (all ranks' tokens over rank 0's barrier-to-barrier time) and of each rank (its tokens
over its own time from that barrier to the end of its last step), each rank's CPU time as a share
of that (below 100%: the core was shared), and model FLOP/s, counted as ringtrain's
Model::trainingFlopsPerSample does (gpt_pytorch_reference.model_flops_per_sample). For memory
(scripts/bench/memory.sh): each rank's peak resident set at the end (resource.getrusage's
ru_maxrss, start-up and the torch libraries included) and the bytes of its optimiser's state.
Needs Debian's python3-torch (PyTorch 1.13, built with gloo), hence /usr/bin/python3 above.
"""
import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_pytorch_reference as reference  # noqa: E402  (model, AdamW, FLOPs, options)
import rendezvous  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    reference.add_run_arguments(p)
    p.add_argument("--nprocs", type=int, default=0,
                   help="ranks to spawn (default: mpirun's, or 1 when not under mpirun)")
    p.add_argument("--bind", action="store_true", help="with spawn: pin rank r to one CPU")
    p.add_argument("--rendezvous", metavar="FILE",
                   help="a new file where the ranks meet (default: named after the mpirun job)")
    p.add_argument("--json", help="rank 0 writes the result here")
    p.add_argument("--zero", action="store_true",
                   help="shard AdamW's state with ZeroRedundancyOptimizer")
    return p.parse_args()


def train(rank, ranks, args, torch):
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    if ranks > 1 or args.zero:
        dist.init_process_group("gloo", init_method=rendezvous.init_method(args.rendezvous),
                                rank=rank, world_size=ranks)
    model = reference.build(torch, args)  # the same seed on every rank
    parameters = sum(p.numel() for p in model.parameters())
    if ranks > 1:
        # DDP broadcasts rank 0's parameters, as ringtrain does; not the causal masks (constant
        # bool buffers, which gloo cannot broadcast).
        torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
            model, [name for name, _ in model.named_buffers()])
        model = torch.nn.parallel.DistributedDataParallel(model)
    if args.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        optimizer = ZeroRedundancyOptimizer(reference.adamw_groups(model),
                                            optimizer_class=torch.optim.AdamW,
                                            **reference.ADAMW_SETTINGS)
    else:
        optimizer = reference.adamw(torch, model)
    inputs, targets = reference.random_batches(torch, args, args.warmup + args.steps,
                                               args.seed + 1 + rank)

    def step(i):
        return reference.train_step(model, optimizer, inputs[i], targets[i], args.precision)

    def barrier():
        if ranks > 1:
            dist.barrier()

    for i in range(args.warmup):
        step(i)
    barrier()
    start, cpu_start = time.perf_counter(), time.process_time()
    times, losses = [], []
    for i in range(args.warmup, args.warmup + args.steps):
        step_start = time.perf_counter()
        losses.append(step(i))
        times.append(time.perf_counter() - step_start)
    own = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    barrier()
    seconds = time.perf_counter() - start
    # Every rank's own time, CPU time, last loss, peak resident set and optimiser state bytes,
    # gathered on every rank.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux counts KiB
    mine = torch.tensor([own, cpu, losses[-1], statistics.median(times), peak,
                         state_bytes(torch, optimizer)], dtype=torch.float64)
    if ranks > 1:
        gathered = [torch.zeros_like(mine) for _ in range(ranks)]
        dist.all_gather(gathered, mine)
    else:
        gathered = [mine]
    if rank == 0:
        report(args, torch, ranks, parameters, seconds, [g.tolist() for g in gathered], losses)
    if dist.is_initialized():
        dist.barrier()
        # Torch 1.13 can deadlock in ~ProcessGroupGloo when the DDP reducer is destroyed at exit
        # (the main thread holds the GIL, a gloo worker waits for it): leave without destructors.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def state_bytes(torch, optimizer):
    """Bytes of the tensors the optimiser keeps per parameter (moments; not its step counts):
    the local shard's with ZeroRedundancyOptimizer."""
    inner = getattr(optimizer, "optim", optimizer)
    return sum(t.numel() * t.element_size() for state in inner.state.values()
               for key, t in state.items() if key != "step" and torch.is_tensor(t))


def report(args, torch, ranks, parameters, seconds, per_rank, losses):
    tokens_per_rank = args.batch * args.context * args.steps
    total = ranks * tokens_per_rank / seconds
    flops_per_token = reference.model_flops_per_sample(args.layers, args.width, args.context,
                                                       args.vocab) / args.context
    rank_rates = [tokens_per_rank / own for own, *_ in per_rank]
    framework = "pytorch-ddp-gloo" if ranks > 1 else "pytorch"
    result = {
        "framework": framework + ("-zero" if args.zero else ""), "torch": torch.__version__,
        "zero": int(args.zero), "precision": args.precision,
        "ranks": ranks, "threads_per_rank": 1, "layers": args.layers, "heads": args.heads,
        "width": args.width, "context": args.context, "vocab": args.vocab,
        "batch_per_rank": args.batch, "parameters": parameters, "warmup": args.warmup,
        "steps": args.steps, "seconds": seconds, "tokens_per_second": total,
        "tokens_per_second_per_rank": rank_rates,
        "cpu_share_per_rank": [cpu / own for own, cpu, *_ in per_rank],
        "step_seconds_median_per_rank": [row[3] for row in per_rank],
        "peak_resident_bytes_per_rank": [int(row[4]) for row in per_rank],
        "optimizer_state_bytes_per_rank": [int(row[5]) for row in per_rank],
        "parameter_bytes": 4 * parameters,
        "model_flops_per_token": flops_per_token,
        "model_flops_per_second": total * flops_per_token,
        "model_flops_per_second_per_rank": total * flops_per_token / ranks,
        "first_timed_loss_rank0": losses[0],
        "last_loss_mean": sum(row[2] for row in per_rank) / ranks,
    }
    kind = ("DDP (gloo)" if ranks > 1 else "no DDP") + (
        ", ZeroRedundancyOptimizer" if args.zero else "")
    rates = ", ".join(f"{r:.0f}" for r in rank_rates)
    cpu = ", ".join(f"{100 * s:.0f}%" for s in result["cpu_share_per_rank"])
    reference.emit(f"pytorch {torch.__version__} {kind}, {ranks} rank(s) x 1 thread, gpt "
                   f"L{args.layers} H{args.heads} C{args.width} T{args.context} V{args.vocab} "
                   f"({parameters / 1e6:.2f}M parameters), batch {args.batch} per rank: "
                   f"{args.steps} steps in {seconds:.2f} s, {total:.0f} tokens/s (per rank: "
                   f"{rates}), {result['model_flops_per_second_per_rank'] / 1e9:.1f} GFLOP/s "
                   f"per rank; CPU time {cpu} of the wall time", result, args.json)


def spawned(rank, ranks, args):
    import torch
    if args.bind:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    train(rank, ranks, args, torch)


def main():
    args = parse_args()
    if min(args.layers, args.heads, args.width, args.context, args.vocab, args.batch,
           args.steps) < 1 or args.warmup < 0 or args.nprocs < 0 or args.width % args.heads:
        print("gpt_pytorch_ddp_reference.py: sizes, --batch and --steps must be at least 1, "
              "--warmup and --nprocs at least 0, --width a multiple of --heads", file=sys.stderr)
        return 2
    # One thread per rank, BLAS included (Debian's OpenBLAS would start one per core); spawned
    # ranks inherit it.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        import torch
        import torch.multiprocessing
    except ImportError as e:
        print(f"gpt_pytorch_ddp_reference.py: no PyTorch for {sys.executable} ({e}); "
              "apt-get install python3-torch", file=sys.stderr)
        return 2
    mpi_size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "0"))
    if mpi_size:
        if args.nprocs not in (0, mpi_size):
            print(f"gpt_pytorch_ddp_reference.py: --nprocs {args.nprocs} under mpirun -np "
                  f"{mpi_size}: use one or the other", file=sys.stderr)
            return 2
        train(int(os.environ["OMPI_COMM_WORLD_RANK"]), mpi_size, args, torch)
    elif args.nprocs > 1:
        with tempfile.TemporaryDirectory(prefix="torch-rendezvous-") as folder:
            args.rendezvous = args.rendezvous or os.path.join(folder, "store")
            torch.multiprocessing.spawn(spawned, args=(args.nprocs, args), nprocs=args.nprocs)
    else:
        spawned(0, 1, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
