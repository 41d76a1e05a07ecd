"""Horovod's meaning of DistributedOptimizer and its helpers under mpirun, every rank checking
itself: a parameter that got no gradient on some ranks is still averaged (every rank ends with
the same parameters, the right ones); an extra backward, or zero_grad() before synchronize(), is
refused on every rank; synchronize() then step() warns and does not average again; Horovod's
name checks; broadcast_optimizer_state with state on root only (SGD momentum, Adam's betas);
broadcast_object and allgather_object; the Compression classes; gradient_predivide_factor;
sparse_as_dense; float64 parameters and parameters whose requires_grad changes; a process set; SyncBatchNorm
against BatchNorm on the global batch. Finally every model trained here has the same parameters,
to the bit, on every rank. Exits 77 (SKIP) without python3-torch."""
import sys
import warnings

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain
import ringtrain.torch as rt

from rank_checks import Checks, raises

torch.set_num_threads(1)
check = Checks(lambda: f"rank {rt.rank()}/{rt.size()}")
trained = []  # (what, model): every model trained, compared across ranks at the end


def identical_everywhere(params):
    """Whether every rank holds these tensors to the bit (rank 0's, gathered)."""
    for p in params:
        rows = rt.allgather(p.detach().reshape(1, -1).contiguous())
        if not all(torch.equal(rows[r], rows[0]) for r in range(rt.size())):
            return False
    return True


def mean_over_ranks(f):
    return sum(f(r) for r in range(rt.size())) / rt.size()


# --- 1. a parameter without a gradient on some ranks ---------------------------------------

class Branches(torch.nn.Module):
    """Rank r takes branch a (float32) if r is even, branch b (float32 and float64) if odd."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(8))
        self.b = torch.nn.Parameter(torch.zeros(8))
        self.d = torch.nn.Parameter(torch.zeros(8, dtype=torch.float64))
        self.c = torch.nn.Parameter(torch.zeros(8))

    def forward(self, x, r):
        branch = (self.a * x).sum() if r % 2 == 0 else (self.b * x).sum() + (self.d * x).sum()
        return branch + (self.c * x).sum()


def data_of(r):
    return torch.arange(8, dtype=torch.float32) + 4 * r + 1  # small integers: exact sums


def check_missing_gradients(steps=3, lr=0.5):
    model = Branches()
    optimizer = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                        named_parameters=model.named_parameters())
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        model(data_of(rt.rank()), rt.rank()).backward()
        optimizer.step()
    even = mean_over_ranks(lambda r: data_of(r) * (r % 2 == 0))
    odd = mean_over_ranks(lambda r: data_of(r) * (r % 2 == 1))
    every = mean_over_ranks(data_of)
    for name, mean in (("a", even), ("b", odd), ("d", odd.double()), ("c", every)):
        want = (-steps * lr * mean).to(getattr(model, name).dtype)
        check(torch.allclose(getattr(model, name).detach(), want, rtol=1e-6),
              f"branch on some ranks: parameter {name} took the average over every rank")
    check(identical_everywhere(model.parameters()),
          "branch on some ranks: parameters identical on every rank")
    trained.append(("branches", model))


# --- 2. extra backward, zero_grad before synchronize, synchronize then step ----------------

def simple(op=rt.Average, passes=1, lr=0.5):
    weight = torch.nn.Parameter(torch.zeros(8))
    optimizer = rt.DistributedOptimizer(torch.optim.SGD([weight], lr=lr), op=op,
                                        named_parameters=[("weight", weight)],
                                        backward_passes_per_step=passes)
    return weight, optimizer


def check_extra_backward():
    weight, optimizer = simple()
    (weight * data_of(rt.rank())).sum().backward()
    check(raises(AssertionError, "optimizer.synchronize()",
                 lambda: (weight * data_of(rt.rank())).sum().backward()),
          "a second backward before step() is refused")
    check(raises(AssertionError, "optimizer.synchronize() first", optimizer.zero_grad),
          "zero_grad() after backward, before synchronize(), is refused")
    optimizer.synchronize()
    check(torch.allclose(weight.grad, mean_over_ranks(data_of)),
          "after the refusal synchronize() averages the one pass")
    optimizer.zero_grad()
    check(torch.equal(weight.detach(), torch.zeros(8)), "no step was taken")
    trained.append(("refused", weight))


def check_passes():
    weight, optimizer = simple(passes=2)
    for step in range(2):
        optimizer.zero_grad()
        for _ in range(2):
            (weight * data_of(rt.rank())).sum().backward()
        if step == 1:
            check(raises(AssertionError, "backward_passes_per_step=2",
                         lambda: (weight * data_of(rt.rank())).sum().backward()),
                  "a third backward with backward_passes_per_step=2 is refused")
        optimizer.step()
    check(torch.allclose(weight.detach(), -2 * 0.5 * 2 * mean_over_ranks(data_of)),
          "backward_passes_per_step=2: two passes summed, then averaged")
    trained.append(("passes", weight))


def check_synchronize_then_step():
    weight, optimizer = simple(op=rt.Sum, lr=1.0)
    total = sum(data_of(r) for r in range(rt.size()))
    (weight * data_of(rt.rank())).sum().backward()
    optimizer.synchronize()
    weight.grad.mul_(0.5)  # clipping, say: the same on every rank
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.step()
    check(len(caught) == 1 and "optimizer.step() called without optimizer.skip_synchronize()"
          in str(caught[0].message), "synchronize() then step(): Horovod's warning")
    check(torch.equal(weight.detach(), -0.5 * total), "... and the gradients not summed again")
    optimizer.zero_grad()
    (weight * data_of(rt.rank())).sum().backward()
    optimizer.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with optimizer.skip_synchronize():
            optimizer.step()
    check(not caught and torch.equal(weight.detach(), -1.5 * total),
          "skip_synchronize(): no warning, one sum")
    trained.append(("synchronize", weight))


# --- 3. names ------------------------------------------------------------------------------

def check_names():
    net1, net2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    both = list(net1.parameters()) + list(net2.parameters())
    dup = list(net1.named_parameters()) + list(net2.named_parameters())
    check(raises(ValueError, "duplicate names: bias, weight", lambda: rt.DistributedOptimizer(
        torch.optim.SGD(both, lr=0.1), named_parameters=dup)), "duplicate names: ValueError")
    check(raises(ValueError, "lacks 1 of the optimizer's parameters", lambda:
                 rt.DistributedOptimizer(torch.optim.SGD(net1.parameters(), lr=0.1),
                                         named_parameters=list(net1.named_parameters())[:1])),
          "a parameter not named: ValueError")
    check(raises(ValueError, "(name, parameter) pairs", lambda: rt.DistributedOptimizer(
        torch.optim.SGD(net1.parameters(), lr=0.1), named_parameters=list(net1.parameters()))),
          "named_parameters that are not pairs: ValueError")
    # A generator over the whole model, the optimizer over its first layer only.
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1))
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = rt.DistributedOptimizer(torch.optim.SGD(model[0].parameters(), lr=0.1),
                                        named_parameters=model.named_parameters())
    unnamed = torch.nn.Linear(4, 1)
    rt.broadcast_parameters(unnamed.state_dict(), root_rank=0)
    plain = rt.DistributedOptimizer(torch.optim.SGD(unnamed.parameters(), lr=0.1))
    x = data_of(rt.rank())[:4].unsqueeze(0)
    for _ in range(2):
        optimizer.zero_grad()
        plain.zero_grad()
        model(x).sum().backward()
        unnamed(x).sum().backward()
        optimizer.step()
        plain.step()
    check(identical_everywhere(model[0].parameters()) and identical_everywhere(
        unnamed.parameters()), "named_parameters over more than the optimizer, and none: trains")
    if rt.size() > 1:
        check(not identical_everywhere([model[1].weight.grad]),
              "a parameter outside the optimizer keeps its own gradient (not averaged)")
    trained.extend([("subset", model[0]), ("unnamed", unnamed)])


# --- 4. broadcast_optimizer_state, broadcast_object, allgather_object ----------------------

def stepped_state(make, steps=2):
    """An optimizer's state_dict after `steps` local steps from fixed values (every rank: the
    same), and the model it was made for."""
    torch.manual_seed(7)
    model = torch.nn.Linear(5, 3)
    optimizer = make(model.parameters(), first=True)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(4, 5)).square().sum().backward()
        optimizer.step()
    return optimizer.state_dict()


def sgd(params, first=False):
    return torch.optim.SGD(params, lr=0.1 if first else 0.3, momentum=0.9 if first else 0.5)


def adam(params, first=False):
    return torch.optim.Adam(params, lr=0.01 if first else 0.02,
                            betas=(0.9, 0.999) if first else (0.8, 0.9), amsgrad=not first)


def same_state(mine, want):
    if mine.keys() != want.keys():
        return False
    return all(torch.equal(v, want[k]) if isinstance(v, torch.Tensor) else
               (type(v) is type(want[k]) and v == want[k]) for k, v in mine.items())


def check_broadcast_state(name, make):
    want = stepped_state(make)
    torch.manual_seed(100 + rt.rank())
    model = torch.nn.Linear(5, 3)
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = rt.DistributedOptimizer(make(model.parameters(), first=rt.rank() == 0),
                                        named_parameters=model.named_parameters())
    if rt.rank() == 0:
        optimizer.load_state_dict(want)  # root resumes from a checkpoint; the others are fresh
    before = [p.detach().clone() for p in model.parameters()]
    rt.broadcast_optimizer_state(optimizer, root_rank=0)
    got = optimizer.state_dict()
    check(all(same_state(got["state"][i], want["state"][i]) for i in want["state"]) and
          got["state"].keys() == want["state"].keys(), f"{name}: root's state on every rank")
    options = {k: v for k, v in want["param_groups"][0].items() if k != "params"}
    check(same_state({k: v for k, v in got["param_groups"][0].items() if k != "params"},
                     options), f"{name}: root's options (with their types) on every rank")
    check(all(torch.equal(a, b) for a, b in zip(before, model.parameters())),
          f"{name}: the parameters are unchanged")
    for _ in range(2):
        optimizer.zero_grad()
        model(data_of(rt.rank())[:5].unsqueeze(0)).sum().backward()
        optimizer.step()
    trained.append((name, model))


def check_fresh_root():
    """Root fresh, the others with state: every rank ends fresh (root's), nothing stepped."""
    want = stepped_state(adam)
    model = torch.nn.Linear(5, 3)
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = rt.DistributedOptimizer(torch.optim.AdamW(model.parameters(), weight_decay=0.5),
                                        named_parameters=model.named_parameters())
    if rt.rank() != 0:
        optimizer.load_state_dict(want)
    before = [p.detach().clone() for p in model.parameters()]
    rt.broadcast_optimizer_state(optimizer, root_rank=0)
    check(len(optimizer.state) == 0 and optimizer.param_groups[0]["weight_decay"] == 0.5 and
          all(torch.equal(a, b) for a, b in zip(before, model.parameters())),
          "root fresh: every rank fresh, root's options, parameters unchanged")
    trained.append(("fresh", model))


def check_state_mismatch():
    shape = 3 if rt.rank() == 0 else 4
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(shape))], lr=0.1)
    check(raises(ValueError, "rank 1's optimizer differs from rank 0's: group 0's parameter 0 "
                 "is [4] where root's is [3]",
                 lambda: rt.broadcast_optimizer_state(optimizer, root_rank=0)),
          "broadcast_optimizer_state over different parameters: ValueError on every rank")


def check_objects():
    want = {"hello": 123, 0: [1, 2], "t": (0.9, None, True)}
    got = rt.broadcast_object(want if rt.rank() == 0 else {"other": rt.rank()}, root_rank=0)
    check(got == want and type(got["t"]) is tuple, "broadcast_object: root's object")
    root = rt.size() - 1
    got = rt.broadcast_object("x" * (13 * rt.rank() + 1), root_rank=root)
    check(got == "x" * (13 * root + 1), "broadcast_object from the last rank")
    every = rt.allgather_object({"rank": rt.rank(), "text": "y" * (7 * rt.rank())})
    check(every == [{"rank": r, "text": "y" * (7 * r)} for r in range(rt.size())],
          "allgather_object: every rank's object in rank order")


# --- 5. compression, gradient_predivide_factor, sparse_as_dense ----------------------------

def check_compression_classes():
    x = torch.tensor([1.5, -2.25, 3.0])
    wire, ctx = rt.Compression.fp16.compress(x)
    check(wire.dtype == torch.float16 and torch.equal(rt.Compression.fp16.decompress(wire, ctx),
                                                      x), "Compression.fp16: 16 bits and back")
    n = torch.tensor([1, 2], dtype=torch.int64)
    check(rt.Compression.fp16.compress(n)[0] is n and rt.Compression.none.compress(x) == (x, None),
          "Compression.fp16 leaves integers alone; Compression.none leaves everything")
    check(raises(ValueError, "not one the engine has", lambda: rt.DistributedOptimizer(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1), compression="fp16")),
          "an unknown compression is refused")


def check_compressed_training():
    for compression in (rt.Compression.fp16, rt.Compression.bf16, ringtrain.Compression.fp16):
        model = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(8)),
                                        torch.nn.Parameter(torch.zeros(8, dtype=torch.float64))])
        optimizer = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                            compression=compression)
        (model[0] * data_of(rt.rank())).sum().backward()
        (model[1] * data_of(rt.rank())).sum().backward()
        optimizer.step()
        mean = mean_over_ranks(data_of)
        check(torch.allclose(model[0].detach(), -mean, rtol=1e-2) and
              torch.allclose(model[1].detach(), -mean.double(), rtol=1e-2),
              f"compression={compression}: the average, in 16 bits")
        trained.append((f"compression {compression}", model))


def check_predivide():
    model = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(8)),
                                    torch.nn.Parameter(torch.zeros(8, dtype=torch.float64))])
    optimizer = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                        gradient_predivide_factor=4.0)
    for p in model:
        (p * data_of(rt.rank())).sum().backward()
    optimizer.step()
    mean = mean_over_ranks(data_of)
    check(torch.allclose(model[0].detach(), -mean, rtol=1e-6) and
          torch.allclose(model[1].detach(), -mean.double(), rtol=1e-12),
          "gradient_predivide_factor=4: the average")
    check(raises(ValueError, "gradient_predivide_factor needs op=Average", lambda:
                 rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                         op=rt.Sum, gradient_predivide_factor=2.0)),
          "gradient_predivide_factor with op=Sum is refused")
    trained.append(("predivide", model))


def check_sparse():
    """Sparse gradients (nn.Embedding(sparse=True)): all-gathered as Horovod's sparse all-reduce,
    or with sparse_as_dense averaged dense and made sparse again; the same step either way."""
    for as_dense in (False, True):
        embedding = torch.nn.Embedding(10, 4, sparse=True)
        rt.broadcast_parameters(embedding.state_dict(), root_rank=0)
        start = embedding.weight.detach().clone()
        optimizer = rt.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=1.0),
                                            sparse_as_dense=as_dense)
        embedding(torch.tensor([rt.rank(), 9])).sum().backward()
        optimizer.step()
        want = start.clone()
        want[:rt.size()] -= 1.0 / rt.size()
        want[9] -= 1.0
        check(embedding.weight.grad.is_sparse and torch.allclose(embedding.weight.detach(), want),
              f"sparse gradients (sparse_as_dense={as_dense}): the average, the gradient sparse")
        trained.append((f"sparse (sparse_as_dense={as_dense})", embedding))


# --- 6. float64 models, requires_grad that changes ------------------------------------------

def check_float64(steps=3):
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    model = model.double()
    reference = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(),
                                    torch.nn.Linear(4, 1)).double()
    reference.load_state_dict(model.state_dict())
    optimizer = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                        named_parameters=model.named_parameters())
    plain = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.randn(2 * rt.size(), 6, dtype=torch.float64)
    mine = slice(2 * rt.rank(), 2 * rt.rank() + 2)
    for _ in range(steps):
        optimizer.zero_grad()
        (model(x[mine]).square().sum() / 2).backward()
        optimizer.step()
        plain.zero_grad()
        (reference(x).square().sum() / (2 * rt.size())).backward()
        plain.step()
    check(all(torch.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in
              zip(model.parameters(), reference.parameters())),
          "float64 model: equals one rank with the whole batch")
    trained.append(("float64", model))


def check_process_set(steps=3):
    """DistributedOptimizer(process_set=): each set averages over its own ranks: the even ranks'
    model equals one process with the even ranks' whole batch, the odd ranks' theirs."""
    sets = [rt.add_process_set([r for r in range(rt.size()) if r % 2 == k]) for k in (0, 1)
            if rt.size() > k]
    mine = sets[rt.rank() % 2]
    torch.manual_seed(11)
    model = torch.nn.Linear(5, 2)
    reference = torch.nn.Linear(5, 2)
    reference.load_state_dict(model.state_dict())
    optimizer = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                        named_parameters=model.named_parameters(),
                                        process_set=mine)
    plain = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.randn(2 * rt.size(), 5, dtype=torch.float32)
    rows = [slice(2 * r, 2 * r + 2) for r in mine.ranks]
    for _ in range(steps):
        optimizer.zero_grad()
        model(x[rows[mine.ranks.index(rt.rank())]]).square().sum().backward()
        optimizer.step()
        plain.zero_grad()
        (sum(reference(x[r]).square().sum() for r in rows) / len(rows)).backward()
        plain.step()
    check(all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in
              zip(model.parameters(), reference.parameters())),
          f"process set {mine.ranks}: equals one process with the set's whole batch")
    for p in model.parameters():
        gathered = rt.allgather(p.detach().reshape(1, -1).contiguous(), process_set=mine)
        check(all(torch.equal(g, gathered[0]) for g in gathered),
              f"process set {mine.ranks}: identical parameters on its ranks")
    # Every rank wraps an optimizer over the even ranks' set: the odd ones step on their own.
    local = torch.nn.Linear(5, 2)
    alone = torch.nn.Linear(5, 2)
    alone.load_state_dict(local.state_dict())
    outside = rt.DistributedOptimizer(torch.optim.SGD(local.parameters(), lr=0.1),
                                      named_parameters=local.named_parameters(),
                                      process_set=sets[0])
    outside.zero_grad()
    local(x[:2]).square().sum().backward()
    outside.step()
    if rt.rank() % 2:
        plain = torch.optim.SGD(alone.parameters(), lr=0.1)
        alone(x[:2]).square().sum().backward()
        plain.step()
        check(all(torch.equal(a, b) for a, b in zip(local.parameters(), alone.parameters())),
              "a rank outside the optimizer's process set steps on its own gradients")
    for process_set in sets:
        rt.remove_process_set(process_set)


def check_dynamic_requires_grad():
    gen, disc = torch.nn.Conv2d(1, 3, 1), torch.nn.Conv2d(3, 1, 1)
    for m in (gen, disc):
        rt.broadcast_parameters(m.state_dict(), root_rank=0)
    gen_opt = rt.DistributedOptimizer(torch.optim.SGD(gen.parameters(), lr=0.1),
                                      named_parameters=gen.named_parameters())
    disc_opt = rt.DistributedOptimizer(torch.optim.SGD(disc.parameters(), lr=0.1),
                                       named_parameters=disc.named_parameters())
    x = torch.rand(1, 1, 4, 4) + rt.rank()
    ok = True
    for step in range(4):
        train_gen = step % 2 == 0
        for p in gen.parameters():
            p.requires_grad_(train_gen)
        for p in disc.parameters():
            p.requires_grad_(not train_gen)
        gen_opt.zero_grad()
        disc_opt.zero_grad()
        disc(gen(x)).sum().backward()
        frozen = disc if train_gen else gen
        ok = ok and all(p.grad is None or not p.grad.any() for p in frozen.parameters())
        (gen_opt if train_gen else disc_opt).step()
    check(ok, "requires_grad switched between steps: the frozen half gets no gradient")
    trained.extend([("generator", gen), ("discriminator", disc)])


# --- 7. SyncBatchNorm ----------------------------------------------------------------------

def global_batch(channels, length, seed):
    """Rank r's rows are r + 2 of the global batch (sizes differ); every rank builds it all."""
    g = torch.Generator().manual_seed(seed)
    rows = [r + 2 for r in range(rt.size())]
    x = torch.randn(sum(rows), channels, length, generator=g) * 3 + 1
    dy = torch.randn(sum(rows), channels, length, generator=g)
    start = sum(rows[:rt.rank()])
    return x, dy, slice(start, start + rows[rt.rank()])


def check_sync_batch_norm(channels=3, length=5):
    sync, reference = rt.SyncBatchNorm(channels), torch.nn.BatchNorm1d(channels)
    with torch.no_grad():
        for m in (sync, reference):
            m.weight.copy_(torch.linspace(0.5, 2.0, channels))
            m.bias.copy_(torch.linspace(-1.0, 1.0, channels))
    for step in range(2):
        x, dy, mine = global_batch(channels, length, seed=10 + step)
        for m in (sync, reference):
            m.zero_grad()
        xr = x[mine].clone().requires_grad_()
        out = sync(xr)
        (out * dy[mine]).sum().backward()
        xg = x.clone().requires_grad_()
        want = reference(xg)
        (want * dy).sum().backward()
        check(torch.allclose(out, want[mine], atol=1e-5), f"SyncBatchNorm step {step}: output")
        check(torch.allclose(xr.grad, xg.grad[mine], atol=1e-5),
              f"SyncBatchNorm step {step}: input gradient")
        summed = [rt.allreduce(p.grad, op=rt.Sum) for p in (sync.weight, sync.bias)]
        check(torch.allclose(summed[0], reference.weight.grad, atol=1e-4) and
              torch.allclose(summed[1], reference.bias.grad, atol=1e-4),
              f"SyncBatchNorm step {step}: weight and bias gradients, summed over the ranks")
        check(torch.allclose(sync.running_mean, reference.running_mean, atol=1e-5) and
              torch.allclose(sync.running_var, reference.running_var, atol=1e-5),
              f"SyncBatchNorm step {step}: running statistics (unbiased global variance)")
    sync.eval()
    reference.eval()
    check(torch.allclose(sync(x[mine]), reference(x)[mine], atol=1e-5),
          "SyncBatchNorm in eval: the running statistics")


def check_sync_batch_norm_training(steps=3):
    """A model with SyncBatchNorm under DistributedOptimizer equals one rank on the whole batch
    with the loss divided by size() (the optimizer averages each rank's sum)."""
    def make():
        torch.manual_seed(5)
        return torch.nn.Sequential(torch.nn.Linear(4, 3), rt.SyncBatchNorm(3),
                                   torch.nn.Linear(3, 2))
    model = make()
    reference = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3),
                                    torch.nn.Linear(3, 2))
    reference.load_state_dict(model.state_dict())
    optimizer = rt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                        named_parameters=model.named_parameters())
    plain = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(steps):
        x, dy, mine = global_batch(4, 1, seed=20 + step)
        x, dy = x[:, :, 0], dy[:, :2, 0]
        optimizer.zero_grad()
        (model(x[mine]) * dy[mine]).sum().backward()
        optimizer.step()
        plain.zero_grad()
        ((reference(x) * dy).sum() / rt.size()).backward()
        plain.step()
    check(all(torch.allclose(a, b, atol=1e-5) for a, b in
              zip(model.parameters(), reference.parameters())),
          "SyncBatchNorm under DistributedOptimizer: equals BatchNorm on the global batch")
    trained.append(("sync batch norm", model))


rt.init()
check_missing_gradients()
check_extra_backward()
check_passes()
check_synchronize_then_step()
check_names()
check_broadcast_state("SGD momentum", sgd)
check_broadcast_state("Adam", adam)
check_fresh_root()
check_state_mismatch()
check_objects()
check_compression_classes()
check_compressed_training()
check_predivide()
check_sparse()
check_float64()
check_dynamic_requires_grad()
check_process_set()
check_sync_batch_norm()
check_sync_batch_norm_training()
for what, model in trained:
    params = model.parameters() if isinstance(model, torch.nn.Module) else [model]
    check(identical_everywhere(list(params)), f"{what}: parameters identical on every rank")
rt.shutdown()
check.exit()
