"""Horovod's DistributedOptimizer on the engine's bucketed gradient exchange."""
import contextlib
import weakref

import torch

from ringtrain import _ringtrain as _ext

from .compression import Compression
from .mpi_ops import Average, Sum


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
