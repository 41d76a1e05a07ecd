"""One way's timing of PyTorch-side collectives, run under mpirun by torch_collectives.sh: WAY is
"ringtrain" (ringtrain.torch, Horovod's calls) or "gloo" (torch.distributed on gloo). For each
op and size it times repeated calls (after warm-up) and rank 0 prints one JSON line per point
with the median microseconds per call over the repetitions.

    torch_collectives.py WAY ROUND SIZES OPS SECONDS
"""
import json
import os
import statistics
import sys
import time

import torch

import rendezvous

way, round_, sizes, ops, seconds = (sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")],
                                    sys.argv[4].split(","), float(sys.argv[5]))
GROUP = 64  # tensors in the grouped all-reduce

if way == "ringtrain":
    import ringtrain.torch as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
else:
    import torch.distributed as dist
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo",
                            init_method=rendezvous.init_method(os.environ["BENCH_RENDEZVOUS"]),
                            rank=rank, world_size=size)


def ringtrain_call(op, tensor, parts):
    if op == "allreduce":
        return lambda: hvd.allreduce_(tensor, op=hvd.Sum, name="bench")
    if op == "allgather":
        return lambda: hvd.allgather(tensor, name="bench")
    if op == "reducescatter":
        return lambda: hvd.reducescatter(tensor, op=hvd.Sum, name="bench")
    return lambda: hvd.grouped_allreduce_(parts, op=hvd.Sum, name="bench")


def gloo_call(op, tensor, parts):
    if op == "allreduce":
        return lambda: dist.all_reduce(tensor)
    if op == "allgather":
        outputs = [torch.empty_like(tensor) for _ in range(size)]
        return lambda: dist.all_gather(outputs, tensor)
    if op == "reducescatter":
        output = torch.empty(tensor.numel() // size)
        inputs = list(tensor.chunk(size))
        try:
            dist.reduce_scatter(output, inputs)
            return lambda: dist.reduce_scatter(output, inputs)
        except RuntimeError:  # gloo has none: what a gloo user does instead
            def emulated():
                dist.all_reduce(tensor)
                output.copy_(tensor.chunk(size)[rank])
            return emulated

    def grouped():  # one after another: faster on gloo here than 64 async_op=True in flight
        for p in parts:
            dist.all_reduce(p)
    return grouped


def timed(call):
    """Median microseconds per call over repetitions filling about `seconds`."""
    for _ in range(3):
        call()
    start = time.perf_counter()
    call()
    once = max(time.perf_counter() - start, 1e-6)
    reps = max(5, min(2000, int(seconds / once)))
    # The ranks agree on the count (rank 0's), so that every rank makes the same calls.
    count = torch.tensor([reps], dtype=torch.int64)
    if way == "ringtrain":
        hvd.broadcast_(count, 0, name="bench.reps")
    else:
        dist.broadcast(count, 0)
    samples = []
    for _ in range(int(count)):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


for op in ops:
    for nbytes in sizes:
        elements = max(nbytes // 4, GROUP if op == "grouped" else size)
        elements -= elements % (GROUP if op == "grouped" else size)
        tensor = torch.ones(elements)
        parts = list(torch.ones(elements).chunk(GROUP))
        make = ringtrain_call if way == "ringtrain" else gloo_call
        try:
            micros = timed(make(op, tensor, parts))
        except RuntimeError as error:  # gloo lacks reduce_scatter in some PyTorch versions
            micros, note = None, str(error).splitlines()[0][:100]
        else:
            note = ""
        if rank == 0:
            print(json.dumps({"way": way, "op": op, "bytes": elements * 4, "round": round_,
                              "ranks": size, "us": micros, "note": note}), flush=True)

if way == "ringtrain":
    hvd.shutdown()
else:
    dist.destroy_process_group()
