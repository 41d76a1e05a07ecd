"""ringtrain.torch's DistributedOptimizer under mpirun, every rank checking itself: an MLP and a
small transformer, with SGD + momentum and with AdamW, trained 20 steps on N ranks (each on its
share of the batch) equal one rank with the whole batch, trained here by every rank beside it,
within relative 1e-5; and every rank's parameters are the same to the bit. Exits 77 (SKIP)
without python3-torch."""
import copy
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain.torch as rt
import torch_training as t

torch.set_num_threads(1)


def run(model_name, make_optimizer):
    """Problems found on this rank (empty: none), and the difference from one rank."""
    torch.manual_seed(100 + rt.rank())  # different on every rank: the broadcast must fix it
    model = t.model(model_name)
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    reference = copy.deepcopy(model)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = rt.DistributedOptimizer(make_optimizer(trained),
                                        named_parameters=model.named_parameters())
    rt.broadcast_optimizer_state(optimizer, root_rank=0)
    reference_optimizer = make_optimizer([p for p in reference.parameters() if p.requires_grad])
    mine = t.share(rt.rank(), rt.size())
    first = None
    for x, y in t.batches():
        optimizer.zero_grad()
        t.loss_of(model, x[mine], y[mine]).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        loss = t.loss_of(reference, x, y)
        loss.backward()
        reference_optimizer.step()
        first = loss.item() if first is None else first
    problems = []
    difference = t.relative_difference(model, reference)
    if not difference <= t.TOLERANCE:
        problems.append(f"differs from 1 rank with the whole batch by {difference:.3g} (relative)")
    for r in t.differing_ranks(model, rt.allgather, rt.size()):
        problems.append(f"rank {r}'s parameters differ from rank 0's")
    if not t.loss_of(reference, x, y).item() < first:
        problems.append("the loss did not fall")
    return problems, difference


rt.init()
failed = False
for model_name in t.MODELS:
    for optimizer_name, make_optimizer in t.OPTIMIZERS.items():
        problems, difference = run(model_name, make_optimizer)
        what = f"rank {rt.rank()}/{rt.size()}: {model_name} with {optimizer_name}"
        for problem in problems:
            print(f"FAIL {what}: {problem}", flush=True)
        if not problems:
            print(f"ok   {what}: {t.STEPS} steps, relative difference {difference:.2g} from 1 "
                  "rank, parameters identical on every rank", flush=True)
        failed = failed or bool(problems)
rt.shutdown()
sys.exit(1 if failed else 0)
