"""ringtrain.torch on CUDA tensors (NCCL), under mpirun, every rank checking itself against the
same call on CPU tensors: all-reduce of every type and op, prescale and postscale, in-place, async
and grouped forms, a stream other than the default (the ready event), broadcast, all-gather of
uneven rows, all-to-all with splits, reduce-scatter of uneven rows, gradients through the
collectives, DistributedOptimizer training a small model on the GPU (identical on every rank, and
as the CPU path trains it), broadcast_parameters and broadcast_optimizer_state, and the errors:
a rank on the CPU where another is on the GPU, int16, and join() beside a CUDA all-reduce.

Exact (torch.equal) where NCCL's sums run in the host path's order: one or two ranks, integers,
bool, min and max. With three ranks or more the floating-point sums and products may round in
another order: within TOLERANCE then. Each check prints one line; each rank ends with
"rank r: ALL OK (k checks)" or "rank r: N of k checks FAILED". Exits 77 (SKIP), saying why,
without python3-torch, without a CUDA device in torch, in a build of ringtrain without the GPU
path, or with fewer GPUs than ranks on the node (NCCL takes one GPU per rank)."""
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain.torch as hvd


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(77)


if not torch.cuda.is_available():
    skip(f"torch {torch.__version__} sees no CUDA device (torch.version.cuda = "
         f"{torch.version.cuda})")
if not hvd.cuda_built():
    skip("this build of ringtrain has no GPU path (RINGTRAIN_CUDA=OFF, or CUDA/NCCL not found)")
hvd.init(stall_timeout_seconds=120)  # a part that breaks on one rank ends the job, not ctest
if torch.cuda.device_count() < hvd.local_size():
    skip(f"{hvd.local_size()} ranks on this node but {torch.cuda.device_count()} GPU(s): NCCL "
         "takes one GPU per rank")

RANK, SIZE = hvd.rank(), hvd.size()
GPU = torch.device("cuda", hvd.local_rank())
torch.cuda.set_device(GPU)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
EXACT_SUMS = SIZE <= 2
# (rtol, atol) for float sums and products of three ranks or more.
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12),
             torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTEGERS = [torch.int32, torch.int64, torch.uint8, torch.int8]
OPS = {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max,
       "product": hvd.Product}

checks = failures = 0


def check(condition, what):
    global checks, failures
    checks += 1
    failures += 0 if condition else 1
    print(f"{'ok  ' if condition else 'FAIL'} rank {RANK}/{SIZE}: {what}", flush=True)


def raises(kind, texts, call):
    """The error's text, if `call` raises `kind` with every one of `texts` in it; else None."""
    try:
        call()
    except kind as error:
        return str(error) if all(t in str(error) for t in texts) else None
    return None


def sample(dtype, shape, seed, op="sum"):
    """This rank's input: values that the op keeps in range (small integers for products)."""
    g = torch.Generator().manual_seed(1000 * seed + RANK)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in INTEGERS:
        low, high = (-3, 4) if op == "product" else (-50, 51)
        if dtype == torch.uint8:
            low, high = (0, 4) if op == "product" else (0, 100)
        return torch.randint(low, high, shape, generator=g).to(dtype)
    scale = 1.0 if op == "product" else 10.0
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def same(gpu, cpu, exact, what):
    """gpu (a CUDA tensor) against the CPU path's result: bit for bit, or within TOLERANCE."""
    ok = gpu.is_cuda and gpu.device == GPU and gpu.dtype == cpu.dtype and gpu.shape == cpu.shape
    got = gpu.cpu()
    if ok and exact:
        ok = torch.equal(got, cpu)
    elif ok:
        rtol, atol = TOLERANCE[cpu.dtype]
        ok = torch.allclose(got.double(), cpu.double(), rtol=rtol, atol=atol)
    if not ok and gpu.shape == cpu.shape:
        worst = (got.double() - cpu.double()).abs().max().item() if got.numel() else 0
        what += f" [largest difference {worst}, device {gpu.device}]"
    check(ok, what + (" (bitwise)" if exact else " (within tolerance)"))


def exact_for(dtype, op):
    return EXACT_SUMS or dtype not in FLOATS or op in ("min", "max")


def check_allreduce_types():
    for i, dtype in enumerate(FLOATS + INTEGERS + [torch.bool]):
        for j, (name, op) in enumerate(OPS.items()):
            if dtype == torch.bool and name == "average":
                continue
            t = sample(dtype, (5, 67), 10 * i + j, name)
            cpu = hvd.allreduce(t, op=op, name=f"cpu.{dtype}.{name}")
            gpu = hvd.allreduce(t.to(GPU), op=op, name=f"gpu.{dtype}.{name}")
            same(gpu, cpu, exact_for(dtype, name), f"allreduce {name} of {dtype}")


def check_scaling():
    for dtype in FLOATS + [torch.int32, torch.int64, torch.uint8]:
        for name in ("sum", "average"):
            for pre, post in ((0.5, 3.0), (0.3, 1.7)):
                t = sample(dtype, (1000,), 7, name)
                args = dict(op=OPS[name], prescale_factor=pre, postscale_factor=post)
                cpu = hvd.allreduce(t, name=f"cpu.scaled.{dtype}.{name}.{pre}", **args)
                gpu = hvd.allreduce(t.to(GPU), name=f"gpu.scaled.{dtype}.{name}.{pre}", **args)
                same(gpu, cpu, exact_for(dtype, name),
                     f"allreduce {name} of {dtype} prescale {pre} postscale {post}")


def check_forms():
    t = sample(torch.float32, (3, 1001), 11)
    cpu = hvd.allreduce(t, name="cpu.forms")
    inplace = t.to(GPU)
    returned = hvd.allreduce_(inplace, name="gpu.inplace")
    same(inplace, cpu, EXACT_SUMS, "allreduce_ in place")
    check(returned.data_ptr() == inplace.data_ptr(), "allreduce_ returns its own tensor")
    handles = [hvd.allreduce_async(t.to(GPU) * k, name=f"gpu.async.{k}") for k in range(4)]
    polled = hvd.poll(handles[0]) in (True, False)
    results = [hvd.synchronize(h) for h in handles]
    cpus = [hvd.allreduce(t * k, name=f"cpu.async.{k}") for k in range(4)]
    check(polled, "poll on a CUDA handle answers")
    for k in range(4):
        same(results[k], cpus[k], EXACT_SUMS, f"allreduce_async {k} of 4 + synchronize")
    group = [sample(torch.float32, (k + 1, 9), 20 + k) for k in range(3)]
    cpu_group = hvd.grouped_allreduce(group, op=hvd.Sum, name="cpu.group")
    gpu_group = hvd.grouped_allreduce([g.to(GPU) for g in group], op=hvd.Sum, name="gpu.group")
    for k in range(3):
        same(gpu_group[k], cpu_group[k], EXACT_SUMS, f"grouped_allreduce tensor {k}")
    in_place = [g.to(GPU) for g in group]
    hvd.grouped_allreduce_(in_place, op=hvd.Sum, name="gpu.group_")
    for k in range(3):
        same(in_place[k], cpu_group[k], EXACT_SUMS, f"grouped_allreduce_ tensor {k}")


def check_ready_event():
    """The input is written by a long product on a side stream just before the submit: NCCL's
    stream must wait for it (the event), with no host synchronisation in between."""
    side = torch.cuda.Stream(GPU)
    x = torch.ones(2048, 2048, device=GPU)
    with torch.cuda.stream(side):
        y = (x @ x @ x)[:4] + RANK  # each element 2048 * 2048 + RANK
        h = hvd.allreduce_async(y, op=hvd.Sum, name="gpu.ready")
        y_kept = y
    result = hvd.synchronize(h)
    expected = torch.full((4, 2048), float(2048 * 2048 * SIZE + sum(range(SIZE))))
    same(result, expected, True, "allreduce waits for the side stream's product (ready event)")
    del y_kept


def check_broadcast():
    root = SIZE - 1
    for dtype in FLOATS + INTEGERS + [torch.bool]:
        t = sample(dtype, (4, 33), 30)
        cpu = hvd.broadcast(t, root_rank=root, name=f"cpu.bcast.{dtype}")
        gpu = hvd.broadcast(t.to(GPU), root_rank=root, name=f"gpu.bcast.{dtype}")
        same(gpu, cpu, True, f"broadcast of {dtype} from rank {root}")
    t = sample(torch.float32, (7,), 31).to(GPU)
    hvd.broadcast_(t, root_rank=0, name="gpu.bcast_")
    same(t, hvd.broadcast(sample(torch.float32, (7,), 31), 0, name="cpu.bcast_"), True,
         "broadcast_ in place")


def check_allgather():
    for dtype in (torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool):
        t = sample(dtype, (RANK + 1, 3), 40)  # uneven rows
        cpu = hvd.allgather(t, name=f"cpu.gather.{dtype}")
        gpu = hvd.allgather(t.to(GPU), name=f"gpu.gather.{dtype}")
        same(gpu, cpu, True, f"allgather of {dtype}, rank r has r + 1 rows")
    empty = torch.zeros(0, 5, device=GPU)
    gathered = hvd.allgather(empty, name="gpu.gather.empty")
    check(gathered.is_cuda and tuple(gathered.shape) == (0, 5), "allgather of no rows on CUDA")
    group = hvd.grouped_allgather([torch.full((2,), RANK, device=GPU, dtype=torch.int32)] * 2,
                                  name="gpu.gather.group")
    expected = torch.arange(SIZE, dtype=torch.int32).repeat_interleave(2)
    check(all(g.is_cuda and torch.equal(g.cpu(), expected) for g in group),
          "grouped_allgather on CUDA")


def check_alltoall():
    splits = [(j + RANK) % 3 for j in range(SIZE)]
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        t = sample(dtype, (sum(splits), 4), 50)
        cpu, cpu_received = hvd.alltoall(t, splits=splits, name=f"cpu.a2a.{dtype}")
        gpu, gpu_received = hvd.alltoall(t.to(GPU), splits=splits, name=f"gpu.a2a.{dtype}")
        same(gpu, cpu, True, f"alltoall of {dtype} with splits {splits}")
        check(torch.equal(gpu_received, cpu_received), f"alltoall of {dtype}: received splits")
    t = sample(torch.float32, (2 * SIZE, 3), 51)
    same(hvd.alltoall(t.to(GPU), name="gpu.a2a.even"), hvd.alltoall(t, name="cpu.a2a.even"), True,
         "alltoall in equal parts")


def check_reducescatter():
    rows = 2 * SIZE + 1  # uneven: the first rank one row more
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32):
        for name in ("sum", "average"):
            t = sample(dtype, (rows, 6), 60, name)
            args = dict(op=OPS[name], prescale_factor=0.5, postscale_factor=3.0)
            cpu = hvd.reducescatter(t, name=f"cpu.rs.{dtype}.{name}", **args)
            gpu = hvd.reducescatter(t.to(GPU), name=f"gpu.rs.{dtype}.{name}", **args)
            same(gpu, cpu, exact_for(dtype, name),
                 f"reducescatter {name} of {dtype}, {rows} rows, scaled 0.5/3")
    t = sample(torch.float32, (rows, 2), 61)
    gpu = hvd.grouped_reducescatter([t.to(GPU)], op=hvd.Sum, name="gpu.rs.group")[0]
    same(gpu, hvd.reducescatter(t, op=hvd.Sum, name="cpu.rs.group"), EXACT_SUMS,
         "grouped_reducescatter")


def check_gradients():
    t = sample(torch.float32, (5, 4), 70)
    results = {}
    for where in ("cpu", "gpu"):
        x = (t.to(GPU) if where == "gpu" else t.clone()).requires_grad_()
        y = hvd.allreduce(x, op=hvd.Sum, name=f"{where}.grad.allreduce")
        z = hvd.allgather(x, name=f"{where}.grad.allgather")
        (y * y).sum().backward(retain_graph=True)
        (z * 2).sum().backward()
        results[where] = x.grad
    same(results["gpu"], results["cpu"], EXACT_SUMS,
         "gradients through allreduce and allgather")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def train(device, steps=5):
    """Every rank starts from one seed, trains on its own data; returns the model, and per step
    the largest difference between the GPU's averaged gradient and the CPU path's all-reduce of
    the same local gradients (0 where bitwise)."""
    torch.manual_seed(5)
    model = Net().to(device)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    g = torch.Generator().manual_seed(100 + RANK)
    gaps = []
    for step in range(steps):
        x, target = torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), target.to(device))
        loss.backward()
        local = [p.grad.detach().cpu().clone() for p in model.parameters()]
        optimizer.synchronize()
        reference = [hvd.allreduce(grad, name=f"{device.type}.reference.{step}.{k}")
                     for k, grad in enumerate(local)]
        gaps.append(max((p.grad.cpu() - r).abs().max().item()
                        for p, r in zip(model.parameters(), reference)))
        with optimizer.skip_synchronize():
            optimizer.step()
    return model, gaps


def check_optimizer():
    gpu_model, gaps = train(GPU)
    cpu_model, _ = train(torch.device("cpu"))
    check(all(p.is_cuda for p in gpu_model.parameters()), "DistributedOptimizer keeps a CUDA model")
    check(max(gaps) == 0 if EXACT_SUMS else max(gaps) < 1e-6,
          f"DistributedOptimizer's CUDA gradients are the CPU all-reduce's of the same local "
          f"gradients (largest difference {max(gaps)})")
    flat = torch.cat([p.detach().reshape(-1) for p in gpu_model.parameters()])
    everyone = hvd.allgather(flat.unsqueeze(0), name="gpu.params.everyone")
    check(all(torch.equal(everyone[k], flat) for k in range(SIZE)),
          "after 5 steps the CUDA parameters are identical on every rank (bitwise)")
    cpu_flat = torch.cat([p.detach().reshape(-1) for p in cpu_model.parameters()])
    gap = (flat.cpu() - cpu_flat).abs().max().item()
    check(gap < 1e-5, f"CUDA training matches the CPU path's within 1e-5 (largest difference "
                      f"{gap}: cuBLAS and the CPU's products round differently)")


def check_broadcast_state():
    torch.manual_seed(9 + RANK)  # every rank its own model and state
    model = Net().to(GPU)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    if RANK == 0:  # root has stepped; the others' optimizers are fresh
        model(torch.randn(3, 8, device=GPU)).sum().backward()
        optimizer.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = hvd.allgather(flat.unsqueeze(0), name="gpu.bcast_params")
    check(flat.is_cuda and all(torch.equal(everyone[k], flat) for k in range(SIZE)),
          "broadcast_parameters of a CUDA model: identical on every rank")
    state = optimizer.state[next(iter(model.parameters()))]
    avg = state.get("exp_avg")
    ok = avg is not None and avg.is_cuda
    if ok:
        gathered = hvd.allgather(avg.reshape(1, -1), name="gpu.bcast_state")
        ok = all(torch.equal(gathered[k], avg.reshape(-1)) for k in range(SIZE))
    check(ok, "broadcast_optimizer_state of Adam on CUDA: root's state, on the GPU, everywhere")


def check_errors():
    text = raises(ValueError, ["int16", "NCCL"],
                  lambda: hvd.allreduce(torch.zeros(3, dtype=torch.int16, device=GPU)))
    check(text is not None, f"int16 on CUDA: one clear error ({text})")
    if SIZE < 2:
        return
    t = torch.ones(3)
    text = raises(RuntimeError, ["rank 0", "rank 1", "on the CPU", "on the GPU"],
                  lambda: hvd.allreduce(t if RANK == 0 else t.to(GPU), name="mixed"))
    check(text is not None, f"CPU on rank 0, CUDA elsewhere: one error on every rank ({text})")
    hvd.barrier()
    if RANK == 0:
        last = hvd.join()
        check(last != 0 or SIZE == 1, "join() beside CUDA all-reduces returns")
    else:
        text = raises(RuntimeError, ["has joined", "GPU"],
                      lambda: hvd.allreduce(torch.ones(2, device=GPU), name="after.join"))
        check(text is not None, f"a CUDA all-reduce with rank 0 joined: a clear error ({text})")
        hvd.join()


def main():
    check(hvd.nccl_built() > 0 and hvd.cuda_built(),
          f"nccl_built() = {hvd.nccl_built()}, cuda_built() = {hvd.cuda_built()}")
    for part in (check_allreduce_types, check_scaling, check_forms, check_ready_event,
                 check_broadcast, check_allgather, check_alltoall, check_reducescatter,
                 check_gradients, check_optimizer, check_broadcast_state, check_errors):
        try:
            part()
        except Exception as error:  # one broken part must not hide the others' results
            check(False, f"{part.__name__} raised {type(error).__name__}: {error}")
    hvd.barrier()
    if failures:
        print(f"rank {RANK}: {failures} of {checks} checks FAILED", flush=True)
    else:
        print(f"rank {RANK}: ALL OK ({checks} checks)", flush=True)
    hvd.shutdown()
    sys.exit(1 if failures else 0)


main()
