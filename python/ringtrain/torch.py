"""Horovod's PyTorch API on ringtrain's engine: a Horovod script changes only its import.

    import ringtrain.torch as rt
    rt.init()
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = rt.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    rt.broadcast_optimizer_state(opt, root_rank=0)

DistributedOptimizer hooks each parameter's gradient: as backward finishes it, its bucket goes
to the engine's communication thread, which averages while backward goes on; step() waits for
the averages and then steps. From its first announcement on, a gradient lives in the engine's own
buffer (p.grad is a view of it, which backward accumulates into while zero_grad() leaves it in
place), so that it is not copied there each step; shutdown() gives each such p.grad back a copy.
CPU tensors only (the binding has no GPU path). A script that keeps DistributedDataParallel calls
init_process_group() and registers allreduce_hook instead.
"""
import contextlib
import queue
import threading
import weakref

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


_MAX_ALLGATHER_DIMS = 16


def allgather(tensor, name=None):
    """Every rank's tensor concatenated along dimension 0. The first dimension may differ from
    rank to rank (as in Horovod), the others may not; a 0-d tensor counts as shape (1,)."""
    tensor = tensor.detach().contiguous()
    if tensor.dim() == 0:
        tensor = tensor.reshape(1)
    _buffer(tensor, "allgather")
    if tensor.dim() > _MAX_ALLGATHER_DIMS:
        raise ValueError(f"ringtrain.torch.allgather: {tensor.dim()} dimensions; at most "
                         f"{_MAX_ALLGATHER_DIMS}")
    # Every rank's shape (the trailing dimensions padded with -1), then the rows padded to the
    # longest: one all-gather of equal sizes each.
    shape = list(tensor.shape) + [-1] * (_MAX_ALLGATHER_DIMS - tensor.dim())
    shapes = _gather_equal(torch.tensor(shape, dtype=torch.int64)).view(size(), -1)
    for r in range(size()):
        if not torch.equal(shapes[r, 1:], shapes[0, 1:]):
            def shown(row):
                return "[*" + "".join(f", {int(d)}" for d in row[1:] if d >= 0) + "]"
            raise ValueError(f"ringtrain.torch.allgather: rank {r}'s tensor is "
                             f"{shown(shapes[r])} where rank 0's is {shown(shapes[0])}: every "
                             "dimension but the first must agree")
    rows = [int(n) for n in shapes[:, 0]]
    if max(rows) == 0:
        return tensor.new_empty(tensor.shape)
    if min(rows) == max(rows):
        return _gather_equal(tensor).view((size() * rows[0],) + tuple(tensor.shape[1:]))
    padded = tensor.new_zeros((max(rows),) + tuple(tensor.shape[1:]))
    padded[:tensor.shape[0]] = tensor
    gathered = _gather_equal(padded).view((size(),) + tuple(padded.shape))
    return torch.cat([gathered[r, :rows[r]] for r in range(size())])


def _gather_equal(tensor):
    """The ranks' tensors of one size, one after another, flat."""
    out = tensor.new_empty((size() * tensor.numel(),))
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
        self._rt_passes = backward_passes_per_step
        self._rt_exchange = _ext.GradientExchange(compression, op)
        self._rt_index = {}
        # Backward finishes the last layers first: registered in reverse, so that the first
        # buckets are ready first (the engine waits for them in this order).
        for name, p in reversed(named):
            if p.requires_grad:
                self._rt_check_parameter(name, p)
                self._rt_index[p] = self._rt_exchange.add_parameter(name, p.numel())
        self._rt_delay = {p: self._rt_passes for p in self._rt_index}
        self._rt_views = {}  # parameter -> its gradient's place in the engine's buffer
        _optimizers.add(self)
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
        view = self._rt_views.get(p)
        if view is None:
            view = torch.from_numpy(self._rt_exchange.gradient_buffer(self._rt_index[p]))
            view = self._rt_views[p] = view.view(p.shape)
        if grad.data_ptr() != view.data_ptr():
            # Copied once; then backward accumulates there (unless p.grad is set to None again).
            view.copy_(grad)
            p.grad = view
        self._rt_exchange.gradient_ready(self._rt_index[p], view.data_ptr())
        self._rt_announced.add(p)

    def _rt_release_views(self):
        """Each p.grad that is a view of the engine's buffer becomes a copy (before shutdown)."""
        for p, view in self._rt_views.items():
            if p.grad is not None and p.grad.data_ptr() == view.data_ptr():
                p.grad = p.grad.clone()
        self._rt_views = {}

    def synchronize(self):
        """Waits for every gradient's average (gradients backward did not reach: at once)."""
        for p in self._rt_index:
            if p not in self._rt_announced and p.grad is not None:
                self._rt_announce(p)
        self._rt_exchange.wait()
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


_optimizers = weakref.WeakSet()  # every DistributedOptimizer, for shutdown()


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average):
    """`optimizer` whose step() first averages the gradients over the ranks (Horovod's
    hvd.DistributedOptimizer). Every rank must wrap the same parameters in the same order."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op)


class _HookWorker:
    """One thread that all-reduces DDP's buckets in the order DDP hands them over (the same on
    every rank), so that backward goes on meanwhile; the binding releases the GIL while it
    waits. Started at the first bucket, stopped by shutdown()."""

    def __init__(self):
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ringtrain-ddp-hook", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            tensor, future = item
            try:
                allreduce_(tensor, op=Average)
            except BaseException as error:  # noqa: B902 - handed to DDP's wait
                future.set_exception(error)
            else:
                future.set_result(tensor)

    def submit(self, tensor):
        future = torch.futures.Future()
        self._queue.put((tensor, future))
        return future

    def stop(self):
        self._queue.put(None)
        self._thread.join()


_hook_worker = None


def allreduce_hook(state, bucket):
    """DDP communication hook: ddp.register_comm_hook(None, rt.allreduce_hook). Averages each
    DDP bucket with ringtrain's all-reduce on a thread of its own, so that backward goes on
    while the bucket travels, and returns the future DDP waits for."""
    global _hook_worker
    if _hook_worker is None:
        _buffer(bucket.buffer(), "allreduce_hook")  # a call before init() fails here, at once
        _hook_worker = _HookWorker()
    return _hook_worker.submit(bucket.buffer())


def _stop_hook_worker():
    global _hook_worker
    if _hook_worker is not None:
        _hook_worker.stop()
        _hook_worker = None


def shutdown():
    """Ends the job's use of ringtrain (Horovod's hvd.shutdown())."""
    _stop_hook_worker()
    for optimizer in list(_optimizers):
        optimizer._rt_release_views()
    _ringtrain.shutdown()


def init_process_group(backend="gloo", timeout_seconds=300):
    """torch.distributed's process group over the ranks of ringtrain's job (rank() and size()),
    which DistributedDataParallel needs even when ringtrain's hook averages its gradients. One
    node: rank 0 picks a free port on 127.0.0.1 and ringtrain broadcasts it; gloo then talks over
    the loopback interface (GLOO_SOCKET_IFNAME=lo unless set). Nothing happens if a group exists.
    """
    import datetime
    import os
    import socket

    import torch.distributed as dist
    if dist.is_initialized():
        return
    if local_size() != size():
        raise Error(f"ringtrain.torch.init_process_group: the job spans several nodes "
                    f"({local_size()} of {size()} ranks on this one); it builds a group on one "
                    "node only: call torch.distributed.init_process_group yourself")
    port = torch.zeros(1, dtype=torch.int64)
    if rank() == 0:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port[0] = probe.getsockname()[1]
    broadcast_(port, 0)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{int(port[0])}",
                            rank=rank(), world_size=size(),
                            timeout=datetime.timedelta(seconds=timeout_seconds))
