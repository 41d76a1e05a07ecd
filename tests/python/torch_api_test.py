"""ringtrain.torch's calls under mpirun, every rank checking itself: DistributedOptimizer with
op=rt.Sum leaves the sum of the ranks' gradients, to the bit (on 3 ranks values where 3 times the
average is not the sum); allreduce's ops; allgather of tensors whose first dimension differs from
rank to rank; bad use gets one clear error; DistributedOptimizer's gradients stay in the engine's
buffer from step to step (p.grad keeps its storage), are averaged right when p.grad is set to None
each step instead, and are copies after shutdown(). Exits 77 (SKIP) without python3-torch."""
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain.torch as rt
from rank_checks import Checks, raises

where = ["before init()"]


def rank_name():
    if rt.is_initialized():
        where[0] = f"rank {rt.rank()}/{rt.size()}"  # kept for the checks after shutdown()
    return where[0]


check = Checks(rank_name)


def gradient_of(rank, size):
    """Integers whose sum over the ranks is below 2**24: exact in any order in float32."""
    base = (2**24 - 64) // size - 32
    return torch.arange(32, dtype=torch.float32) + base + rank % 2


def check_sum():
    weight = torch.nn.Parameter(torch.zeros(32))
    optimizer = rt.DistributedOptimizer(torch.optim.SGD([weight], lr=1.0),
                                        named_parameters=[("weight", weight)], op=rt.Sum)
    (weight * gradient_of(rt.rank(), rt.size())).sum().backward()
    optimizer.synchronize()
    exact = sum(gradient_of(r, rt.size()).double() for r in range(rt.size()))
    check(torch.equal(weight.grad.double(), exact), "DistributedOptimizer(op=Sum): the exact sum")
    if rt.size() == 3:  # the test's values tell the sum from 3 * the average
        thrice = (exact.float() / 3).float() * 3
        check(not torch.equal(thrice.double(), exact), "the values tell Sum from 3 * Average")
    optimizer.zero_grad()
    (weight * 2.0).sum().backward()
    optimizer.step()
    check(torch.equal(weight.grad, torch.full((32,), 2.0 * rt.size())),
          "step() after Sum: the sum again")


def check_gradient_views():
    """After the first step p.grad is the engine's buffer, which zero_grad() and backward keep;
    p.grad set to None each step (zero_grad(set_to_none=True)) still gets the average."""
    weight = torch.nn.Parameter(torch.zeros(32))
    optimizer = rt.DistributedOptimizer(torch.optim.SGD([weight], lr=0.0),
                                        named_parameters=[("weight", weight)])
    mean = sum(gradient_of(r, rt.size()).double() for r in range(rt.size())) / rt.size()
    places = []
    for step in range(3):
        optimizer.zero_grad(set_to_none=False)
        (weight * gradient_of(rt.rank(), rt.size())).sum().backward()
        optimizer.step()
        check(torch.allclose(weight.grad.double(), mean, rtol=1e-6, atol=0),
              f"step {step}: the average in p.grad")
        places.append(weight.grad.data_ptr())
    check(places[1] == places[0] and places[2] == places[0],
          "p.grad keeps the engine's buffer from step to step")
    for step in range(2):
        optimizer.zero_grad(set_to_none=True)
        check(weight.grad is None, "zero_grad(set_to_none=True) leaves no gradient")
        (weight * gradient_of(rt.rank(), rt.size())).sum().backward()
        optimizer.step()
        check(torch.allclose(weight.grad.double(), mean, rtol=1e-6, atol=0),
              f"set_to_none step {step}: the average in p.grad")
    return weight, mean


def check_allreduce():
    n = rt.size()
    mine = torch.tensor([float(rt.rank() + 1)] * 4)
    check(torch.equal(rt.allreduce(mine, op=rt.Sum), torch.full((4,), n * (n + 1) / 2)),
          "allreduce Sum")
    check(torch.equal(rt.allreduce(mine, op=rt.Max), torch.full((4,), float(n))), "allreduce Max")
    check(torch.equal(mine, torch.tensor([float(rt.rank() + 1)] * 4)),
          "allreduce leaves its input alone")


def check_allgather():
    n, me = rt.size(), rt.rank()
    mine = torch.full((me + 1, 2, 3), me, dtype=torch.int64)  # rank r: r + 1 rows of r
    gathered = rt.allgather(mine)
    want = torch.cat([torch.full((r + 1, 2, 3), r, dtype=torch.int64) for r in range(n)])
    check(torch.equal(gathered, want), "allgather of r + 1 rows on rank r")
    same = rt.allgather(torch.tensor([[me, -me]], dtype=torch.int32))
    check(torch.equal(same, torch.tensor([[r, -r] for r in range(n)], dtype=torch.int32)),
          "allgather of one row each")
    if n > 1:
        odd = torch.zeros((2, 3 if me == n - 1 else 2))
        check(raises(RuntimeError, f"rank 0 has allgather of float32 [2, 2] where rank {n - 1} "
                     "has allgather of float32 [2, 3]", lambda: rt.allgather(odd)),
              "allgather of [*, 3] beside [*, 2] names both ranks")


def check_bad_use():
    check(raises(ValueError, "contiguous", lambda: rt.allreduce_(torch.zeros(4, 4).t())),
          "a transposed tensor is refused")
    check(raises(TypeError, "dtype torch.complex64 is not supported",
                 lambda: rt.allreduce_(torch.zeros(3, dtype=torch.complex64))),
          "complex64 is refused")
    check(raises(ValueError, "op must be Average or Sum",
                 lambda: rt.DistributedOptimizer(torch.optim.SGD([torch.nn.Parameter(
                     torch.zeros(1))], lr=1.0), op=rt.Max)),
          "DistributedOptimizer(op=Max) is refused")


check(raises(rt.Error, "called before ringtrain.torch.init()",
             lambda: rt.allreduce(torch.zeros(1))), "allreduce before init() is refused")
rt.init()
check_sum()
check_allreduce()
check_allgather()
check_bad_use()
viewed, viewed_mean = check_gradient_views()
rt.shutdown()
# The engine's buffers are gone (shared memory unmapped): p.grad must be a copy by now.
check(torch.allclose(viewed.grad.double(), viewed_mean, rtol=1e-6, atol=0),
      "after shutdown() p.grad still holds the last average")
check.exit()
