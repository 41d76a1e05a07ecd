"""DistributedDataParallel with ringtrain's communication hook
(ddp.register_comm_hook(None, rt.allreduce_hook)) under mpirun, every rank checking itself: an
MLP and a small transformer, with SGD + momentum and with AdamW, trained 20 steps on N ranks equal
DDP with gloo's all-reduce and one rank with the whole batch, both trained here by every rank
beside it, within relative 1e-5; every rank's parameters are the same to the bit. SGD runs with
DDP's default buckets, AdamW with gradient_as_bucket_view=True (the gradients views of the
buckets that the hook averages in place). The process
group DDP needs is gloo over loopback (rt.init_process_group). Exits 77 (SKIP) without
python3-torch."""
import copy
import sys

try:
    import torch
    from torch.nn.parallel import DistributedDataParallel
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain.torch as rt
import torch_training as t

torch.set_num_threads(1)


def trainable(net):
    return [p for p in net.parameters() if p.requires_grad]


def run(model_name, make_optimizer, bucket_view):
    """Problems found on this rank (empty: none), and the differences from gloo and 1 rank."""
    torch.manual_seed(100 + rt.rank())  # different on every rank: DDP broadcasts rank 0's
    hooked = DistributedDataParallel(t.model(model_name), gradient_as_bucket_view=bucket_view)
    hooked.register_comm_hook(None, rt.allreduce_hook)
    gloo = DistributedDataParallel(copy.deepcopy(hooked.module))
    reference = copy.deepcopy(hooked.module)
    nets = (hooked, gloo, reference)
    optimizers = [make_optimizer(trainable(net)) for net in nets]
    mine = t.share(rt.rank(), rt.size())
    for x, y in t.batches():
        for net, optimizer, part in zip(nets, optimizers, (mine, mine, slice(None))):
            optimizer.zero_grad()
            t.loss_of(net, x[part], y[part]).backward()
            optimizer.step()
    problems = []
    differences = [t.relative_difference(hooked.module, other) for other in (gloo, reference)]
    for difference, other in zip(differences, ("DDP with gloo", "1 rank with the whole batch")):
        if not difference <= t.TOLERANCE:
            problems.append(f"differs from {other} by {difference:.3g} (relative)")
    for r in t.differing_ranks(hooked.module, rt.allgather, rt.size()):
        problems.append(f"rank {r}'s parameters differ from rank 0's")
    return problems, differences


rt.init()
rt.init_process_group()
failed = False
for model_name in t.MODELS:
    for (optimizer_name, make_optimizer), bucket_view in zip(t.OPTIMIZERS.items(), (False, True)):
        problems, (from_gloo, from_one) = run(model_name, make_optimizer, bucket_view)
        what = (f"rank {rt.rank()}/{rt.size()}: DDP + ringtrain hook, {model_name}, "
                f"{optimizer_name}, {'bucket views' if bucket_view else 'bucket copies'}")
        for problem in problems:
            print(f"FAIL {what}: {problem}", flush=True)
        if not problems:
            print(f"ok   {what}: {t.STEPS} steps, relative difference {from_gloo:.2g} from DDP "
                  f"with gloo, {from_one:.2g} from 1 rank, parameters identical on every rank",
                  flush=True)
        failed = failed or bool(problems)
torch.distributed.destroy_process_group()
rt.shutdown()
sys.exit(1 if failed else 0)
