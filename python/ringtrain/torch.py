"""Horovod's PyTorch API on ringtrain's engine: a Horovod script changes only its import.

    import ringtrain.torch as rt
    rt.init()
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = rt.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    rt.broadcast_optimizer_state(opt, root_rank=0)

DistributedOptimizer hooks each parameter's gradient: as backward finishes it, its bucket goes
to the engine's communication thread, which averages while backward goes on; step() waits for
the averages and then steps. CPU tensors only (the binding has no GPU path).
"""
import contextlib

import torch

import ringtrain as _ringtrain
from ringtrain import _ringtrain as _ext

Average = _ext.ReduceOp.average
Sum = _ext.ReduceOp.sum
Min = _ext.ReduceOp.min
Max = _ext.ReduceOp.max
Error = _ext.Error


class Compression:
    """How gradient buckets cross the wire (accumulated in float32 at every hop)."""
    none = _ext.Compression.none
    fp16 = _ext.Compression.fp16
    bf16 = _ext.Compression.bf16


init = _ringtrain.init
shutdown = _ringtrain.shutdown
is_initialized = _ringtrain.started
rank = _ringtrain.rank
size = _ringtrain.size
local_rank = _ringtrain.local_rank
local_size = _ringtrain.local_size

_TYPES = {torch.float32: _ext.DataType.float32, torch.float64: _ext.DataType.float64,
          torch.float16: _ext.DataType.float16, torch.bfloat16: _ext.DataType.bfloat16,
          torch.int32: _ext.DataType.int32, torch.int64: _ext.DataType.int64}


def _buffer(tensor, call):
    """(address, count, DataType) of a tensor the engine can take; one clear error otherwise."""
    where = f"ringtrain.torch.{call}"
    if not _ext.started():
        raise Error(f"{where} called before ringtrain.torch.init()")
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{where}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError(f"{where}: tensor on {tensor.device}: this build averages CPU tensors "
                         "only (it has no GPU path)")
    if tensor.layout != torch.strided or not tensor.is_contiguous():
        raise ValueError(f"{where}: the tensor must be dense and contiguous "
                         "(call .contiguous() first)")
    if tensor.dtype not in _TYPES:
        raise TypeError(f"{where}: dtype {tensor.dtype} is not supported "
                        f"({', '.join(str(t) for t in _TYPES)})")
    return tensor.data_ptr(), tensor.numel(), _TYPES[tensor.dtype]


def allreduce_(tensor, average=None, name=None, op=Average):
    """In place: tensor becomes op over the ranks (average=False means Sum, as in Horovod)."""
    if average is not None:
        op = Average if average else Sum
    address, count, dtype = _buffer(tensor, "allreduce_")
    _ext.allreduce_address(address, count, dtype, op)
    return tensor


def allreduce(tensor, average=None, name=None, op=Average):
    """A new tensor: op over the ranks of `tensor`."""
    return allreduce_(tensor.detach().clone(memory_format=torch.contiguous_format), average,
                      name, op)


def broadcast_(tensor, root_rank, name=None):
    address, count, dtype = _buffer(tensor, "broadcast_")
    _ext.broadcast_address(address, count, dtype, root_rank)
    return tensor


def broadcast(tensor, root_rank, name=None):
    return broadcast_(tensor.detach().clone(memory_format=torch.contiguous_format), root_rank)


def allgather(tensor, name=None):
    """Every rank's tensor concatenated along dimension 0 (all of the same shape)."""
    tensor = tensor.detach().contiguous()
    out = tensor.new_empty((size() * tensor.shape[0],) + tuple(tensor.shape[1:])) \
        if tensor.dim() > 0 else tensor.new_empty((size(),))
    send, count, dtype = _buffer(tensor, "allgather")
    _ext.allgather_address(send, out.data_ptr(), count, dtype)
    return out


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


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the wrapped optimizer's own class by DistributedOptimizer (as Horovod does)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op):
        super(self.__class__, self).__init__(params)
        everything = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            named = [(f"parameter.{i}", p) for i, p in enumerate(everything)]
        else:
            named = list(named_parameters)
        self._rt_check_names(named, everything)
        if op not in (Average, Sum):
            raise ValueError("ringtrain.torch.DistributedOptimizer: op must be Average or Sum")
        self._rt_op = op
        self._rt_passes = backward_passes_per_step
        self._rt_exchange = _ext.GradientExchange(compression)
        self._rt_index = {}
        # Backward finishes the last layers first: registered in reverse, so that the first
        # buckets are ready first (the engine waits for them in this order).
        for name, p in reversed(named):
            if p.requires_grad:
                self._rt_check_parameter(name, p)
                self._rt_index[p] = self._rt_exchange.add_parameter(name, p.numel())
        self._rt_delay = {p: self._rt_passes for p in self._rt_index}
        self._rt_announced = set()
        self._rt_synchronized = False
        self._rt_skip = False
        self._rt_accumulators = []
        for p in self._rt_index:
            # The gradient accumulator's hook runs once p.grad holds this pass's gradient.
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._rt_hook(p))
            self._rt_accumulators.append(accumulator)

    @staticmethod
    def _rt_check_names(named, everything):
        names = [name for name, _ in named]
        if len(set(names)) != len(names):
            raise ValueError("ringtrain.torch.DistributedOptimizer: named_parameters has "
                             "duplicate names")
        known = {id(p) for _, p in named}
        missing = [i for i, p in enumerate(everything) if id(p) not in known]
        if missing:
            raise ValueError("ringtrain.torch.DistributedOptimizer: named_parameters lacks "
                             f"{len(missing)} of the optimizer's parameters")

    @staticmethod
    def _rt_check_parameter(name, p):
        if p.device.type != "cpu" or p.dtype != torch.float32:
            raise TypeError(f"ringtrain.torch.DistributedOptimizer: parameter {name} is "
                            f"{p.dtype} on {p.device}; the engine averages float32 CPU "
                            "gradients")

    def _rt_hook(self, p):
        def hook(*_):
            self._rt_delay[p] -= 1
            if self._rt_delay[p] == 0:
                self._rt_announce(p)
        return hook

    def _rt_announce(self, p):
        grad = p.grad
        if grad.layout != torch.strided or not grad.is_contiguous():
            raise ValueError("ringtrain.torch.DistributedOptimizer: a gradient is sparse or "
                             "not contiguous")
        self._rt_exchange.gradient_ready(self._rt_index[p], grad.data_ptr())
        self._rt_announced.add(p)

    def synchronize(self):
        """Waits for every gradient's average (gradients backward did not reach: at once)."""
        for p in self._rt_index:
            if p not in self._rt_announced and p.grad is not None:
                self._rt_announce(p)
        self._rt_exchange.wait()
        if self._rt_op == Sum:
            for p in self._rt_announced:
                p.grad.mul_(size())
        self._rt_announced = set()
        self._rt_delay = {p: self._rt_passes for p in self._rt_index}
        self._rt_synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() without synchronize(), after the caller called synchronize() itself."""
        self._rt_skip = True
        try:
            yield
        finally:
            self._rt_skip = False

    def step(self, closure=None):
        if not self._rt_skip:
            self.synchronize()
        self._rt_synchronized = False
        return super(self.__class__, self).step(closure)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average):
    """`optimizer` whose step() first averages the gradients over the ranks (Horovod's
    hvd.DistributedOptimizer). Every rank must wrap the same parameters in the same order."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op)


def allreduce_hook(state, bucket):
    """DDP communication hook: ddp.register_comm_hook(None, rt.allreduce_hook). Averages each
    DDP bucket with ringtrain's all-reduce (on the calling thread) instead of the process
    group's."""
    tensor = bucket.buffer()
    allreduce_(tensor, op=Average)
    future = torch.futures.Future()
    future.set_result(tensor)
    return future
