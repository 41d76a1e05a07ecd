"""Horovod's helpers over the collectives: broadcast_parameters, broadcast_optimizer_state,
broadcast_object and allgather_object (horovod.torch.functions)."""
import pickle

import torch

from .mpi_ops import allgather, broadcast_, rank


def _process_set(process_set):
    """The keyword for the collectives: given only when the caller chose a process set."""
    return {} if process_set is None else {"process_set": process_set}


def broadcast_parameters(params, root_rank=0):
    """root_rank's values into every rank's: a state_dict, or (name, tensor) pairs or tensors."""
    if isinstance(params, dict):
        params = sorted(params.items())
    for item in params:
        tensor = item[1] if isinstance(item, tuple) else item
        if tensor is not None:
            broadcast_(tensor.detach(), root_rank)


def _to_words(data):
    """bytes as an int64 tensor (zero-padded to whole words): the engine has no uint8 yet."""
    padded = bytearray(data) + bytes(-len(data) % 8)
    if not padded:
        return torch.zeros(0, dtype=torch.int64)
    return torch.frombuffer(padded, dtype=torch.int64).clone()


def _from_words(words, length):
    return words.numpy().tobytes()[:length]


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """root_rank's `obj` (anything pickle takes), returned on every rank: its length is
    broadcast first, then its bytes. The default name does not depend on obj (Horovod's is its
    type's name), since the other ranks' obj may be of another type (None, say)."""
    name = name or "broadcast_object"
    ps = _process_set(process_set)
    data = pickle.dumps(obj) if rank() == root_rank else b""
    length = torch.tensor([len(data)], dtype=torch.int64)
    broadcast_(length, root_rank, name=f"{name}.length", **ps)
    words = _to_words(data) if rank() == root_rank else \
        torch.zeros((int(length) + 7) // 8, dtype=torch.int64)
    if words.numel():
        broadcast_(words, root_rank, name=f"{name}.bytes", **ps)
    return obj if rank() == root_rank else pickle.loads(_from_words(words, int(length)))


def allgather_object(obj, name=None, process_set=None):
    """Every rank's `obj` (anything pickle takes), as a list in rank order."""
    name = name or "allgather_object"
    ps = _process_set(process_set)
    data = pickle.dumps(obj)
    lengths = allgather(torch.tensor([len(data)], dtype=torch.int64), name=f"{name}.length", **ps)
    words = allgather(_to_words(data), name=f"{name}.bytes", **ps)
    objects, start = [], 0
    for length in lengths.tolist():
        count = (length + 7) // 8
        objects.append(pickle.loads(_from_words(words[start:start + count], length)))
        start += count
    return objects


def broadcast_optimizer_state(optimizer, root_rank=0, model=None):
    """root_rank's optimizer state into every rank's: each group's options (lr, Adam's betas
    tuple, None, ...; with their types) and each parameter's state (tensors and numbers). Root
    sends the layout of its state first; every rank then takes root's keys, creating the
    tensors it lacks (a fresh optimizer, where root has stepped) and dropping those root lacks,
    and the tensors are broadcast. Unlike Horovod no zero-gradient step is taken to create the
    state: that step would count in Adam's bias correction, and a fresh optimizer must stay
    equal to torch's; as after it, a parameter that takes a gradient and has none gets a zero one
    where the state was empty. `model` is Horovod's argument (for sparse parameters), not needed here.
    Collective."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("ringtrain.torch.broadcast_optimizer_state: torch.optim.LBFGS's state "
                         "is not supported (as in Horovod)")
    layout = _layout(optimizer) if rank() == root_rank else None
    layout = broadcast_object(layout, root_rank, name="broadcast_optimizer_state.layout")
    problem = _layout_problem(optimizer, layout)
    for r, theirs in enumerate(allgather_object(problem, name="broadcast_optimizer_state.check")):
        if theirs:
            raise ValueError(f"ringtrain.torch.broadcast_optimizer_state: rank {r}'s optimizer "
                             f"differs from rank {root_rank}'s: {theirs}")
    if not optimizer.state:
        # As after Horovod's state-creating step: every parameter that takes a gradient has one.
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
    for tensor in _take_layout(optimizer, layout):
        broadcast_(tensor, root_rank)


def _describe(value):
    """A tensor by its shape, dtype and whether it is on the GPU (its values travel apart),
    anything else as it is."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.is_cuda)
    return ("value", value)


def _layout(optimizer):
    """Per group: its options, and per parameter its state, described (picklable)."""
    return [{"options": {k: _describe(v) for k, v in group.items() if k != "params"},
             "shapes": [tuple(p.shape) for p in group["params"]],
             "state": [{k: _describe(v) for k, v in optimizer.state.get(p, {}).items()}
                       for p in group["params"]]}
            for group in optimizer.param_groups]


def _layout_problem(optimizer, layout):
    """What makes this rank's optimizer unable to take root's layout ("" if nothing)."""
    mine = [[tuple(p.shape) for p in group["params"]] for group in optimizer.param_groups]
    root = [group["shapes"] for group in layout]
    if len(mine) != len(root):
        return f"{len(mine)} parameter groups where root has {len(root)}"
    for g, (ours, theirs) in enumerate(zip(mine, root)):
        if len(ours) != len(theirs):
            return f"group {g} has {len(ours)} parameters where root's has {len(theirs)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if a != b:
                return f"group {g}'s parameter {i} is {list(a)} where root's is {list(b)}"
    return ""


def _take_layout(optimizer, layout):
    """Root's options and state keys into this rank's optimizer; returns the tensors to
    broadcast, in an order every rank shares (reused in place where shape and dtype agree)."""
    tensors = []

    def take(holder, key, described, p=None):
        if described[0] == "value":
            holder[key] = described[1]
            return
        _, shape, dtype, on_gpu = described
        old = holder.get(key)
        if not (isinstance(old, torch.Tensor) and old.shape == shape and old.dtype == dtype
                and old.is_contiguous() and old.is_cuda == on_gpu):
            # Root's tensor on the GPU: this rank's on its parameter's device (or the current).
            device = "cpu" if not on_gpu else p.device if p is not None and p.is_cuda else \
                torch.device("cuda", torch.cuda.current_device())
            holder[key] = torch.zeros(shape, dtype=dtype, device=device)
        tensors.append(holder[key])

    for group, root in zip(optimizer.param_groups, layout):
        for key, described in root["options"].items():
            take(group, key, described)
        for p, root_state in zip(group["params"], root["state"]):
            if not root_state:
                optimizer.state.pop(p, None)
                continue
            state = optimizer.state[p]
            for key in [k for k in state if k not in root_state]:
                del state[key]
            for key, described in root_state.items():
                take(state, key, described, p)
    return tensors
