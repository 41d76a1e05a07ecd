"""What the PyTorch exactness tests share: the models (examples/pytorch_models.py), optimizers,
batches of a rule the models can learn, and the checks every rank makes of its result."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
import pytorch_models  # noqa: E402

BATCH, STEPS, TOLERANCE = 24, 20, 1e-5
MODELS = ("tiny-mlp", "tiny-transformer")
OPTIMIZERS = {
    "sgd+momentum": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.01),
}


def model(name):
    return pytorch_models.build(name, BATCH)[0]


def batches(seed=7):
    """STEPS batches of BATCH samples, the same on every rank."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(STEPS):
        x = torch.randn(BATCH, 12, generator=generator)
        yield x, (x[:, :4] + x[:, 4:8]).argmax(dim=1)


def share(rank, size):
    """This rank's slice of a batch."""
    part = BATCH // size
    return slice(rank * part, (rank + 1) * part)


def loss_of(net, x, y):
    return torch.nn.functional.cross_entropy(net(x), y)


def flat(net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def relative_difference(ours, theirs):
    return ((flat(ours) - flat(theirs)).norm() / flat(theirs).norm()).item()


def differing_ranks(net, allgather, size):
    """Ranks whose parameters differ from rank 0's in any bit."""
    everyone = allgather(flat(net).view(torch.int32).unsqueeze(0))
    return [r for r in range(size) if not torch.equal(everyone[r], everyone[0])]
