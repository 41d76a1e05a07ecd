"""Horovod's helpers over the collectives: broadcast_parameters, broadcast_optimizer_state."""
import torch

from .mpi_ops import broadcast_


def broadcast_parameters(params, root_rank=0):
    """root_rank's values into every rank's: a state_dict, or (name, tensor) pairs or tensors."""
    if isinstance(params, dict):
        params = sorted(params.items())
    for item in params:
        tensor = item[1] if isinstance(item, tuple) else item
        if tensor is not None:
            broadcast_(tensor.detach(), root_rank)


def _broadcast_number(value, root_rank):
    box = torch.tensor([float(value)], dtype=torch.float64)
    broadcast_(box, root_rank)
    return type(value)(box.item())


def broadcast_optimizer_state(optimizer, root_rank=0):
    """root_rank's hyper-parameters and per-parameter state (momentum buffers, Adam's moments)
    into every rank's optimizer. Every rank's state must have the same keys (all have stepped,
    or none): a difference is reported by the collectives' agreement check."""
    for group in optimizer.param_groups:
        for key in sorted(group):
            value = group[key]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                group[key] = _broadcast_number(value, root_rank)
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            for key in sorted(state):
                value = state[key]
                if isinstance(value, torch.Tensor):
                    broadcast_(value, root_rank)
                elif isinstance(value, (int, float)) and not isinstance(value, bool):
                    state[key] = _broadcast_number(value, root_rank)


def broadcast_object(obj, root_rank=0, name=None):
    raise NotImplementedError("ringtrain.torch.broadcast_object is not written yet")


def allgather_object(obj, name=None):
    raise NotImplementedError("ringtrain.torch.allgather_object is not written yet")
