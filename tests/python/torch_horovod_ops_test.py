"""ringtrain.torch's collectives as Horovod defines them, under mpirun, every rank checking itself:
named operations matched across ranks by name whatever order they are submitted in (two tensors
of one shape, each with its name, reduced in opposite orders on alternate ranks get their own
values), handles, fusion, the error on every rank for ranks that disagree and for a name twice in
flight, every kind of operation (all-gather of uneven rows, broadcast, all-to-all with splits,
reduce-scatter of uneven rows, barrier, join, the timeline), the product and the 8- and 16-bit types, scaling,
process sets, gradients through the collectives, and last that every rank holds identical
results. Exits 77 (SKIP) without python3-torch."""
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain.torch as hvd
from rank_checks import Checks, raises

check = Checks(lambda: f"rank {hvd.rank()}/{hvd.size()}")


def check_matched_by_name(r, n):
    """Silent case 3: each tensor must get its own sum, whatever the order of submission."""
    first = torch.full((64,), 1.0 + r)
    second = torch.full((64,), 1000.0 + r)
    order = [("first", first), ("second", second)]
    if r % 2:
        order.reverse()
    handles = {name: hvd.allreduce_async(t, name=name, op=hvd.Sum) for name, t in order}
    first_sum = hvd.synchronize(handles["first"])
    second_sum = hvd.synchronize(handles["second"])
    check(torch.equal(first_sum, torch.full((64,), sum(1.0 + k for k in range(n)))),
          "'first' reduced in opposite orders holds its own sum")
    check(torch.equal(second_sum, torch.full((64,), sum(1000.0 + k for k in range(n)))),
          "'second' reduced in opposite orders holds its own sum")


def check_async_fused(r, n):
    tensors = [torch.arange(17 * (k + 1), dtype=torch.float32) + r for k in range(8)]
    handles = [hvd.allreduce_async(t, op=hvd.Sum) for t in tensors]
    results = [hvd.synchronize(h) for h in handles]
    check(all(torch.equal(res, t * n - r * n + sum(range(n)))
              for res, t in zip(results, tensors)), "8 async all-reduces (fused) are right")
    check(raises(ValueError, "unknown handle", lambda: hvd.synchronize(handles[0])),
          "a spent handle is refused")


def check_errors(r, n):
    check(raises(RuntimeError, "where rank",
                 lambda: hvd.allreduce(torch.zeros(3 + r), name="uneven")),
          "shapes that differ: one error naming the ranks, on every rank")
    check(raises(RuntimeError, "where rank",
                 lambda: hvd.allreduce(torch.zeros(3, dtype=torch.float64 if r else torch.float32))),
          "types that differ: one error on every rank")
    check(raises(RuntimeError, "from root",
                 lambda: hvd.broadcast(torch.zeros(2), root_rank=r % 2 if n > 1 else 0,
                                       name="roots")) or n == 1,
          "roots that differ: one error on every rank")
    # Rank r's own name stays in flight until the others submit it, after the barrier.
    handles = [hvd.allreduce_async(torch.zeros(2), name=f"twice.{r}")]
    check(raises(ValueError, "already in flight",
                 lambda: hvd.allreduce_async(torch.zeros(2), name=f"twice.{r}")) or n == 1,
          "a name twice in flight is a ValueError")
    hvd.barrier()
    handles += [hvd.allreduce_async(torch.zeros(2), name=f"twice.{k}") for k in range(n) if k != r]
    for handle in handles:
        hvd.synchronize(handle)
    check(raises(ValueError, "splits", lambda: hvd.alltoall(torch.zeros(3), splits=[1] * (n + 1))),
          "all-to-all splits of the wrong length are refused")
    check(raises(TypeError, "not supported",
                 lambda: hvd.allreduce(torch.zeros(2, dtype=torch.complex64))),
          "complex tensors are refused")


def check_kinds(r, n):
    gathered = hvd.allgather(torch.full((r + 1, 2), r, dtype=torch.int16))
    want = torch.cat([torch.full((k + 1, 2), k, dtype=torch.int16) for k in range(n)])
    check(torch.equal(gathered, want), "all-gather of r + 1 int16 rows on rank r")
    root = n - 1
    got = hvd.broadcast(torch.full((3, 2), float(r), dtype=torch.float64), root)
    check(torch.equal(got, torch.full((3, 2), float(root), dtype=torch.float64)),
          "broadcast from the last rank")
    inplace = torch.full((4,), r, dtype=torch.uint8)
    hvd.broadcast_(inplace, 0)
    check(torch.equal(inplace, torch.zeros(4, dtype=torch.uint8)), "broadcast_ in place (uint8)")
    splits = torch.tensor([k + 1 for k in range(n)], dtype=torch.int32)  # k + 1 rows to rank k
    rows = torch.cat([torch.full((k + 1, 2), 10 * r + k) for k in range(n)])
    received, counts = hvd.alltoall(rows, splits)
    want = torch.cat([torch.full((r + 1, 2), 10 * k + r) for k in range(n)])
    check(torch.equal(received, want) and counts.tolist() == [r + 1] * n,
          "all-to-all with splits, and the rows received from each rank")
    scattered = hvd.reducescatter(torch.arange(2 * n + 1, dtype=torch.float32).view(-1, 1) + r,
                                  op=hvd.Sum)
    base, extra = divmod(2 * n + 1, n)
    first = r * base + min(r, extra)
    mine = torch.arange(first, first + base + (r < extra), dtype=torch.float32).view(-1, 1)
    check(torch.equal(scattered, mine * n + sum(range(n))),
          "reduce-scatter of 2n+1 rows: the first ranks one row more")
    # Rows that split evenly into the engine's cut take its reduce-scatter (half an all-reduce's
    # bytes): the same bits as the all-reduce's rows, prescaled and postscaled, on every rank.
    torch.manual_seed(100 + r)
    even = torch.randn(4 * n, 16)
    kwargs = dict(op=hvd.Average, prescale_factor=0.5, postscale_factor=3.0)
    whole = hvd.allreduce(even, name="even.whole", **kwargs)
    check(torch.equal(hvd.reducescatter(even, name="even", **kwargs), whole[4 * r:4 * r + 4]),
          "reduce-scatter of evenly cut rows: the all-reduce's rows, bit for bit")
    hvd.barrier()
    check(True, "barrier returns")
    torch.manual_seed(r)
    sparse = (torch.rand(17, 4) * (torch.rand(17, 4) > 0.8)).to_sparse()
    got = hvd.sparse_allreduce_async(sparse, name="sparse", op=hvd.Average)()
    check(torch.allclose(got.to_dense(), hvd.allreduce(sparse.to_dense()), rtol=1e-6),
          "sparse all-reduce (indices and values gathered) equals the dense average")


def check_types_and_ops(r, n):
    small = torch.tensor([2, 3, -1], dtype=torch.int8)
    check(torch.equal(hvd.allreduce(small, op=hvd.Product),
                      torch.tensor([2 ** n, 3 ** n, (-1) ** n], dtype=torch.int8)),
          "product of int8")
    flags = torch.tensor([r == 0, True, False])
    check(torch.equal(hvd.allreduce(flags, op=hvd.Max), torch.tensor([True, True, False])),
          "bool: max is or")
    check(torch.equal(hvd.allreduce(flags, op=hvd.Min), torch.tensor([n == 1, True, False])),
          "bool: min is and")
    half = torch.full((5,), 3.0, dtype=torch.float16)
    check(torch.equal(hvd.allreduce(half, op=hvd.Sum, prescale_factor=0.5),
                      torch.full((5,), 1.5 * n, dtype=torch.float16)), "float16 prescaled")
    ints = torch.full((5,), 7, dtype=torch.int32)
    check(torch.equal(hvd.allreduce(ints, op=hvd.Sum, postscale_factor=0.5),
                      torch.full((5,), int(7 * n * 0.5), dtype=torch.int32)),
          "int32 post-scaled in float64 and truncated")
    check(raises(ValueError, "supersedes", lambda: hvd.allreduce(ints, average=True, op=hvd.Sum)),
          "average and op together are refused")


def check_process_sets(r, n):
    evens = hvd.add_process_set([k for k in range(n) if k % 2 == 0])
    odds = hvd.add_process_set([k for k in range(n) if k % 2 == 1]) if n > 1 else None
    mine = evens if r % 2 == 0 else odds
    total = hvd.allreduce(torch.full((4,), float(r)), op=hvd.Sum, process_set=mine)
    check(torch.equal(total, torch.full((4,), float(sum(mine.ranks)))),
          f"all-reduce over process set {mine.ranks}")
    got = hvd.broadcast(torch.full((2,), float(r)), mine.ranks[-1], process_set=mine)
    check(torch.equal(got, torch.full((2,), float(mine.ranks[-1]))),
          "broadcast in a set from a world rank")
    check(mine.size() == len(mine.ranks) and mine.rank() == mine.ranks.index(r),
          "the set's size and rank")
    hvd.barrier(process_set=mine)
    check(raises(ValueError, "duplicate", lambda: hvd.add_process_set(evens.ranks)),
          "a set added twice is refused")
    check(hvd.remove_process_set(evens), "a set is removed")
    if odds is not None:
        check(hvd.remove_process_set(odds), "the other set is removed")


def check_gradients(r, n):
    x = torch.full((3,), float(r + 1), requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum).sum().backward()
    check(torch.equal(x.grad, torch.full((3,), float(n))), "allreduce(Sum)'s gradient: n each")
    y = torch.full((r + 1, 2), 1.0, requires_grad=True)
    (hvd.allgather(y) * 2).sum().backward()
    check(torch.equal(y.grad, torch.full((r + 1, 2), 2.0)), "allgather's gradient: its rows'")
    z = torch.ones(4, requires_grad=True)
    hvd.broadcast(z, 0).sum().backward()
    check(torch.equal(z.grad, torch.full((4,), 1.0 if r == 0 else 0.0)),
          "broadcast's gradient: at the root only")


def check_join(r, n):
    """Rank 0 runs out of data first: the others' all-reduces go on with its zeros."""
    if r != 0:
        summed = hvd.allreduce(torch.full((6,), 2.0), name="after-join", op=hvd.Sum)
        check(torch.equal(summed, torch.full((6,), 2.0 * (n - 1))),
              "an all-reduce after rank 0 joined counts its zeros")
    last = hvd.join()
    check(last == (n - 1 if n > 1 else 0) or (n > 2 and last != 0),
          f"join returns the last rank to join ({last})")
    everyone = hvd.allgather(torch.tensor([last]))
    check(everyone.tolist() == [last] * n, "join returns the same rank everywhere")


def check_timeline(r):
    """start_timeline/stop_timeline: one Chrome trace from rank 0 with every operation's span."""
    import json
    import os
    import tempfile
    folder = hvd.broadcast_object(tempfile.mkdtemp() if r == 0 else None, 0)
    path = os.path.join(folder, "timeline.json")
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(10), name="traced.allreduce")
    hvd.allgather(torch.ones(2), name="traced.allgather")
    check(raises(ValueError, "open already", lambda: hvd.start_timeline(path)),
          "a second start_timeline is refused")
    hvd.stop_timeline()
    if r == 0:
        trace = json.load(open(path))
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        names = {e.get("name") for e in events if e.get("ph") == "X"}
        pids = {e.get("pid") for e in events if e.get("name") == "traced.allreduce"}
        check({"traced.allreduce", "traced.allgather"} <= names and len(pids) == hvd.size(),
              "the trace has both operations on every rank")


def check_identical():
    """Every rank's results of a mixed sequence, compared to rank 0's bit by bit."""
    torch.manual_seed(7 + hvd.rank())
    values = torch.randn(1000)
    results = [hvd.allreduce(values, name="same.avg"),
               hvd.allreduce(values.double(), name="same.prod", op=hvd.Product),
               hvd.allreduce(values.bfloat16(), name="same.bf16").float()]
    for k, res in enumerate(results):
        root = hvd.broadcast(res, 0, name=f"same.check.{k}")
        check(torch.equal(root, res), f"result {k} identical to rank 0's, bit for bit")


hvd.init()
rank, size = hvd.rank(), hvd.size()
check_matched_by_name(rank, size)
check_async_fused(rank, size)
check_errors(rank, size)
check_kinds(rank, size)
check_types_and_ops(rank, size)
check_process_sets(rank, size)
check_gradients(rank, size)
check_timeline(rank)
check_identical()
check_join(rank, size)
hvd.shutdown()
check.exit()
