"""torch.distributed's backend "ringtrain" under mpirun, every rank checking itself.

Mode `gloo` (init_process_group("ringtrain", store=...) beside a gloo group on the same store):
every collective's result equals gloo's on the same inputs (async_op=True included, and on a
new_group subgroup), send/recv too; DDP on "ringtrain" with no hook trains an MLP and a small
transformer (SGD + momentum, AdamW) 20 steps to DDP-on-gloo's parameters within relative 1e-5,
bitwise equal on every rank; ZeroRedundancyOptimizer on it equals the unsharded optimizer;
calls that disagree, and a reduce op the engine lacks, are one error on every rank.
Mode `one-word` (no MASTER_ADDR, no store, no init_process_group arguments): DDP trains to
one rank's whole-batch parameters, bitwise equal on every rank.
Mode `bad-rank`: a rank argument that is not MPI's is one ValueError on every rank.
Exits 77 (SKIP) without python3-torch."""
import copy
import os
import re
import socket
import sys

try:
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain.torch as rt
import torch_training as t

torch.set_num_threads(1)
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def trainable(net):
    return [p for p in net.parameters() if p.requires_grad]


def same_on_every_rank(net, what):
    for r in t.differing_ranks(net, rt.allgather, rt.size()):
        check(False, f"{what}: rank {r}'s parameters differ from rank 0's")


def train(nets, optimizers, parts):
    for x, y in t.batches():
        for net, optimizer, part in zip(nets, optimizers, parts):
            optimizer.zero_grad()
            t.loss_of(net, x[part], y[part]).backward()
            optimizer.step()


def ddp_against(model_name, make_optimizer, other_group, what):
    """DDP on the default ("ringtrain") group against DDP on other_group, or, without one, one
    rank with the whole batch."""
    torch.manual_seed(100 + rt.rank())  # different on every rank: DDP broadcasts rank 0's
    ours = DistributedDataParallel(t.model(model_name))
    other = (DistributedDataParallel(copy.deepcopy(ours.module), process_group=other_group)
             if other_group is not None else copy.deepcopy(ours.module))
    nets = (ours, other)
    mine = t.share(rt.rank(), rt.size())
    train(nets, [make_optimizer(trainable(n)) for n in nets],
          (mine, mine if other_group is not None else slice(None)))
    difference = t.relative_difference(ours.module, other)
    check(difference <= t.TOLERANCE, f"{what}: differs by {difference:.3g} (relative)")
    same_on_every_rank(ours.module, what)
    return difference


def zero_against_unsharded():
    torch.manual_seed(5)  # the same on every rank
    sharded = DistributedDataParallel(t.model("tiny-mlp"))
    plain = DistributedDataParallel(copy.deepcopy(sharded.module))
    optimizers = [ZeroRedundancyOptimizer(trainable(sharded), torch.optim.AdamW, lr=1e-2),
                  torch.optim.AdamW(trainable(plain), lr=1e-2)]
    mine = t.share(rt.rank(), rt.size())
    train((sharded, plain), optimizers, (mine, mine))
    difference = t.relative_difference(sharded.module, plain.module)
    check(difference <= t.TOLERANCE, f"ZeroRedundancyOptimizer differs from AdamW by "
          f"{difference:.3g}")
    same_on_every_rank(sharded.module, "ZeroRedundancyOptimizer")


def values(shape, salt, dtype=torch.float32, of_rank=None):
    rank = rt.rank() if of_rank is None else of_rank
    generator = torch.Generator().manual_seed(1000 * salt + rank)
    return (torch.randn(shape, generator=generator) * 4).to(dtype)


def collectives_against(gloo, group_size, name):
    """Each collective on the default group (or subgroup) against gloo's on the same inputs."""
    n, r = group_size, dist.get_rank(gloo)
    cases = {}

    def both(call):
        # gloo (torch 1.13) has no all_gather_into_tensor, reduce-scatter nor list all_to_all:
        # its side gets those from its all_gather, all_reduce and all_to_all_single.
        cases[call.__name__] = [call(None if name == "world" else _SUB, False), call(gloo, True)]

    def all_reduce(group, _):
        out = [values(7, 1), values(3, 2, torch.int64), values(5, 3)]
        dist.all_reduce(out[0], group=group)
        dist.all_reduce(out[1], op=dist.ReduceOp.MAX, group=group)
        dist.all_reduce(out[2], op=dist.ReduceOp.MIN, group=group, async_op=True).wait()
        return out

    def broadcast(group, _):
        out = values((2, 3), 4)
        dist.broadcast(out, src=_world(n - 1), group=group)
        return [out]

    def all_gather(group, is_gloo):
        outs = [torch.empty(4) for _ in range(n)]
        dist.all_gather(outs, values(4, 5), group=group)
        into = torch.empty(n * 3)
        if is_gloo:
            pieces = [torch.empty(3) for _ in range(n)]
            dist.all_gather(pieces, values(3, 6), group=group)
            into = torch.cat(pieces)
        else:
            dist.all_gather_into_tensor(into, values(3, 6), group=group)
        return outs + [into]

    def reduce_scatter(group, is_gloo):
        out = torch.empty(3)
        tensor_out = torch.empty(2, dtype=torch.int64)
        if is_gloo:
            whole = torch.cat([values(3, 7 + i) for i in range(n)])
            dist.all_reduce(whole, group=group)
            out = whole[3 * r:3 * r + 3]
            whole = values(2 * n, 9, torch.int64)
            dist.all_reduce(whole, group=group)
            tensor_out = whole[2 * r:2 * r + 2]
        else:
            dist.reduce_scatter(out, [values(3, 7 + i) for i in range(n)], group=group)
            dist.reduce_scatter_tensor(tensor_out, values(2 * n, 9, torch.int64), group=group)
        return [out, tensor_out]

    def all_to_all(group, is_gloo):
        single = torch.empty(2 * n)
        dist.all_to_all_single(single, values(2 * n, 10), group=group)
        sizes = [i + 1 for i in range(n)]  # rank r sends i+1 rows to rank i, gets r+1 from each
        uneven = torch.empty(n * (r + 1), 2)
        dist.all_to_all_single(uneven, values((sum(sizes), 2), 11), [r + 1] * n, sizes,
                               group=group)
        outs = [torch.empty(2) for _ in range(n)]
        if is_gloo:
            received = torch.empty(2 * n)
            dist.all_to_all_single(received, torch.cat([values(2, 12 + i) for i in range(n)]),
                                   group=group)
            outs = list(received.split(2))
        else:
            dist.all_to_all(outs, [values(2, 12 + i) for i in range(n)], group=group)
        return [single, uneven] + outs

    def rooted(group, _):
        reduced = values(5, 20)
        dist.reduce(reduced, dst=_world(0), op=dist.ReduceOp.SUM, group=group)
        gathered = [torch.empty(3) for _ in range(n)] if r == 0 else None
        dist.gather(values(3, 21), gathered, dst=_world(0), group=group)
        scattered = torch.empty(2)
        pieces = [values(2, 22 + i) for i in range(n)] if r == n - 1 else None
        dist.scatter(scattered, pieces, src=_world(n - 1), group=group)
        dist.barrier(group=group)
        return ([reduced] if r == 0 else []) + (gathered or []) + [scattered]

    for call in (all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, rooted):
        both(call)
    for kind, (ours, theirs) in cases.items():
        for i, (a, b) in enumerate(zip(ours, theirs)):
            close = torch.allclose(a, b, rtol=1e-6, atol=1e-6) if a.is_floating_point() \
                else torch.equal(a, b)
            check(a.shape == b.shape and close, f"{name} {kind}[{i}]: {a} where gloo gives {b}")
    return len(cases)


def point_to_point(gloo):
    """A ring of isend/recv and send/irecv, on ringtrain's group and on gloo's."""
    n, r = rt.size(), rt.rank()
    got = []
    for group in (None, gloo):
        first, second = torch.empty(6), torch.empty(3, dtype=torch.int64)
        sending = dist.isend(values(6, 30), (r + 1) % n, group=group, tag=4)
        dist.recv(first, (r - 1) % n, group=group, tag=4)
        sending.wait()
        receiving = dist.irecv(second, (r + 1) % n, group=group, tag=5)
        dist.send(values(3, 31, torch.int64), (r - 1) % n, group=group, tag=5)
        receiving.wait()
        got.append((first, second))
    (first, second), (gloo_first, gloo_second) = got
    check(torch.equal(first, values(6, 30, of_rank=(r - 1) % n)) and torch.equal(first, gloo_first),
          f"isend/recv: {first}")
    check(torch.equal(second, values(3, 31, torch.int64, of_rank=(r + 1) % n)) and
          torch.equal(second, gloo_second), f"send/irecv: {second}")


def disagreement():
    """Ranks whose n-th calls differ (lengths 4 and 5): one error on every rank, no hang, on the
    plain all-reduce's path (the world's all_reduce) and on the named operations' (broadcast)."""
    lines = []
    for call, want in ((dist.all_reduce, r"ranks disagree on the collective: rank 0 calls "
                        r"all-reduce #\d+ of 4 float32 \(sum\), rank 1 calls all-reduce #\d+ of 5 "
                        r"float32 \(sum\)"),
                       (lambda t: dist.broadcast(t, 0), r"rank 0 has broadcast of float32 \[4\] from "
                        r"root 0 where rank 1 has broadcast of float32 \[5\] from root 0")):
        try:
            call(torch.ones(4 + rt.rank() % 2))
        except RuntimeError as error:
            check(re.search(want, str(error)), f"the error: {error}")
            lines.append(str(error).splitlines()[0])
            continue
        check(False, f"{want}: raised nothing")
    return "; ".join(lines)


def _world(group_rank):
    return _SUB_RANKS[group_rank] if _SUB_RANKS else group_rank


_SUB, _SUB_RANKS = None, None


def store():
    port = torch.zeros(1, dtype=torch.int64)
    if rt.rank() == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port[0] = probe.getsockname()[1]
    rt.broadcast_(port, 0)
    return dist.TCPStore("127.0.0.1", int(port[0]), rt.size(), rt.rank() == 0)


def with_gloo():
    global _SUB, _SUB_RANKS
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("ringtrain", store=store(), rank=rt.rank(), world_size=rt.size())
    check(dist.get_backend() == "ringtrain", f"the default backend is {dist.get_backend()}")
    gloo = dist.new_group(backend="gloo")
    count = collectives_against(gloo, rt.size(), "world")
    _SUB_RANKS = [r for r in range(rt.size()) if r != 1]  # a subgroup without rank 1
    _SUB = dist.new_group(_SUB_RANKS)
    gloo_sub = dist.new_group(_SUB_RANKS, backend="gloo")
    if rt.rank() in _SUB_RANKS and len(_SUB_RANKS) > 1:
        collectives_against(gloo_sub, len(_SUB_RANKS), "subgroup")
    _SUB, _SUB_RANKS = None, None
    report(f"{count} kinds of collective equal gloo's, on the world and a subgroup")
    point_to_point(gloo)
    report("send/recv, isend/irecv in a ring equal gloo's")
    for model_name in t.MODELS:
        for optimizer_name, make_optimizer in t.OPTIMIZERS.items():
            what = f"DDP on ringtrain, {model_name}, {optimizer_name}, against DDP on gloo"
            report(f"{what}: relative difference "
                   f"{ddp_against(model_name, make_optimizer, gloo, what):.2g}")
    zero_against_unsharded()
    report("ZeroRedundancyOptimizer equals the unsharded AdamW")
    report(f"mismatched calls: {disagreement()}")
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int64), op=dist.ReduceOp.BAND)
        check(False, "all_reduce with BAND raised nothing")
    except ValueError as error:
        check("BAND is not supported" in str(error), f"the error of BAND: {error}")
        report(f"an op the engine lacks: {error}")


def one_word():
    for variable in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        os.environ.pop(variable, None)
    dist.init_process_group("ringtrain")
    check((dist.get_rank(), dist.get_world_size()) == (rt.rank(), rt.size()),
          f"rank/size {dist.get_rank()}/{dist.get_world_size()}, MPI's {rt.rank()}/{rt.size()}")
    for model_name in t.MODELS:
        what = f"DDP on ringtrain (init_process_group(\"ringtrain\") alone), {model_name}"
        difference = ddp_against(model_name, t.OPTIMIZERS["sgd+momentum"], None, what)
        report(f"{what}: relative difference {difference:.2g} from 1 rank with the whole batch")


def bad_rank():
    wrong = (rt.rank() + 1) % rt.size() if rt.rank() == rt.size() - 1 else rt.rank()
    try:
        dist.init_process_group("ringtrain", rank=wrong, world_size=rt.size())
    except ValueError as error:
        check("rank" in str(error) and str(rt.size() - 1) in str(error), f"the error: {error}")
        report(f"a wrong rank on rank {rt.size() - 1} is an error here: {error}")
        return
    check(False, "init_process_group accepted a rank that is not MPI's")


def report(line):
    if not problems:
        print(f"ok   rank {rt.rank()}/{rt.size()}: {line}", flush=True)


rt.init()
mode = sys.argv[1] if len(sys.argv) > 1 else "gloo"
{"gloo": with_gloo, "one-word": one_word, "bad-rank": bad_rank}[mode]()
for problem in problems:
    print(f"FAIL rank {rt.rank()}/{rt.size()} ({mode}): {problem}", flush=True)
if dist.is_initialized():
    dist.destroy_process_group()
rt.shutdown()
sys.exit(1 if problems else 0)
