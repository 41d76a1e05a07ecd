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

BATCH, STEPS, TOLERANCE = 24, 20, 1e-5
torch.set_num_threads(1)


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 4))


class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(12, 16)
        self.layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                                      batch_first=True)
        self.head = torch.nn.Linear(16, 4)
        # The key bias moves no output (softmax ignores a shift), so its gradient is rounding
        # noise, which AdamW scales up to full steps: 1 and N ranks' noise differ by far more
        # than 1e-5. Frozen (the query and value biases with it: PyTorch keeps them together).
        self.layer.self_attn.in_proj_bias.requires_grad_(False)

    def forward(self, x):  # x: batch x 12 -> a sequence of 3 tokens of 4 features, padded to 12
        tokens = self.embed(x.view(x.shape[0], 3, 4).repeat(1, 1, 3))
        return self.head(self.layer(tokens).mean(dim=1))


OPTIMIZERS = {
    "sgd+momentum": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.01),
}


def loss_of(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def run(make_model, make_optimizer):
    """Problems found on this rank (empty: none)."""
    torch.manual_seed(100 + rt.rank())  # different on every rank: the broadcast must fix it
    model = make_model()
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    reference = copy.deepcopy(model)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = rt.DistributedOptimizer(make_optimizer(trained),
                                        named_parameters=model.named_parameters())
    rt.broadcast_optimizer_state(optimizer, root_rank=0)
    reference_optimizer = make_optimizer([p for p in reference.parameters() if p.requires_grad])
    generator = torch.Generator().manual_seed(7)  # the same batches on every rank
    share = BATCH // rt.size()
    mine = slice(rt.rank() * share, (rt.rank() + 1) * share)
    first = None
    for _ in range(STEPS):
        x = torch.randn(BATCH, 12, generator=generator)
        y = (x[:, :4] + x[:, 4:8]).argmax(dim=1)  # a rule the models can learn
        optimizer.zero_grad()
        loss_of(model, x[mine], y[mine]).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        loss = loss_of(reference, x, y)
        loss.backward()
        reference_optimizer.step()
        first = loss.item() if first is None else first
    problems = []
    ours, theirs = flat(model), flat(reference)
    difference = ((ours - theirs).norm() / theirs.norm()).item()
    if not difference <= TOLERANCE:
        problems.append(f"differs from 1 rank with the whole batch by {difference:.3g} (relative)")
    everyone = rt.allgather(ours.view(torch.int32).unsqueeze(0))
    for r in range(rt.size()):
        if not torch.equal(everyone[r], everyone[0]):
            problems.append(f"rank {r}'s parameters differ from rank 0's")
    if not loss_of(reference, x, y).item() < first:
        problems.append("the loss did not fall")
    return problems, difference


rt.init()
failed = False
for model_name, make_model in (("mlp", mlp), ("transformer", Transformer)):
    for optimizer_name, make_optimizer in OPTIMIZERS.items():
        problems, difference = run(make_model, make_optimizer)
        what = f"rank {rt.rank()}/{rt.size()}: {model_name} with {optimizer_name}"
        for problem in problems:
            print(f"FAIL {what}: {problem}", flush=True)
        if not problems:
            print(f"ok   {what}: {STEPS} steps, relative difference {difference:.2g} from 1 rank, "
                  "parameters identical on every rank", flush=True)
        failed = failed or bool(problems)
rt.shutdown()
sys.exit(1 if failed else 0)
