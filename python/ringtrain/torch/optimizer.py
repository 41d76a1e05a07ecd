"""Horovod's DistributedOptimizer on the engine's bucketed gradient exchange.

Each float32 CPU parameter of the optimizer is registered with an _ext.GradientExchange; a hook
on its gradient accumulator counts backward passes and, after backward_passes_per_step of them,
announces the gradient, whose bucket then travels while backward goes on. The gradient lives in
the engine's buffer (p.grad is a view of it) so that no copy is made from step to step. Other
parameters (float64, float16, ...) are averaged with the plain all-reduce in synchronize(), CUDA
ones on the GPU through NCCL (all submitted, then waited for; not overlapped with backward).
"""
import collections
import contextlib
import warnings
import weakref

import torch

from ringtrain import _ringtrain as _ext

from . import mpi_ops
from .compression import Compression, _compressor
from .mpi_ops import Average, Sum

_WHERE = "ringtrain.torch.DistributedOptimizer"


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the wrapped optimizer's own class by DistributedOptimizer (as Horovod does)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        named = _named_parameters(named_parameters, self.param_groups)  # checked before init()
        # The engine's exchange spans every rank; a smaller process set takes the all-reduce.
        self._rt_process_set = process_set or mpi_ops.global_process_set
        global_set = self._rt_process_set.process_set_id == 0
        # A rank outside the set steps on its own gradients (as Horovod's does).
        set_ranks = _ext.process_set_ranks(self._rt_process_set.process_set_id)
        self._rt_included = mpi_ops.rank() in set_ranks
        self._rt_set_size = len(set_ranks)
        self._rt_compressor = compression
        self._rt_op = op
        self._rt_passes = backward_passes_per_step
        self._rt_predivide = gradient_predivide_factor
        self._rt_sparse_as_dense = sparse_as_dense
        self._rt_exchange = _ext.GradientExchange(compression.engine, op)
        self._rt_names = dict((p, name) for name, p in named)
        self._parameter_names = self._rt_names  # Horovod's attribute of the same meaning
        self._rt_index = {}   # float32 CPU parameter -> its index in the exchange
        # Backward finishes the last layers first: registered in reverse, so that the first
        # buckets are ready first (the engine waits for them in this order).
        for name, p in reversed(named):
            if p.requires_grad and _on_engine(name, p) and global_set:
                self._rt_index[p] = self._rt_exchange.add_parameter(name, p.numel())
        # The rest go through allreduce_ in synchronize(), in the optimizer's order.
        self._rt_others = [p for _, p in named if p not in self._rt_index]
        # parameter -> its gradient's place in the engine's buffer. Made here, since the first
        # gradient_buffer() is collective: in backward, ranks whose branches reach different
        # parameters would make it at different points among their other collectives.
        self._rt_views = {p: torch.from_numpy(self._rt_exchange.gradient_buffer(i)).view(p.shape)
                          for p, i in self._rt_index.items()}
        _optimizers.add(self)
        self._rt_reset_step()
        self._rt_synchronized = False
        self._rt_skip = False
        self._rt_accumulators = []
        for _, p in named:
            if p.requires_grad:
                # The accumulator's pre-hook runs before this pass's gradient is added to
                # p.grad, its hook after: the first refuses an extra pass, the second counts it.
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_prehook(self._rt_check_pass(p))
                accumulator.register_hook(self._rt_count_pass(p))
                self._rt_accumulators.append(accumulator)

    def _rt_reset_step(self):
        self._rt_delay = {p: self._rt_passes for p in self._rt_names}
        self._rt_counted = set()    # parameters whose hook ran since the last synchronize()
        self._rt_announced = set()  # parameters given to the exchange this step
        self._rt_sparse = set()     # parameters whose sparse gradient was made dense
        self._rt_gathered = set()   # parameters whose sparse gradient is all-gathered

    def _rt_check_pass(self, p):
        def prehook(*_):
            if self._rt_delay[p] <= 0:
                raise AssertionError(
                    f"{_WHERE}: parameter {self._rt_names[p]} got more gradients than "
                    f"backward_passes_per_step={self._rt_passes} before step(): call "
                    "optimizer.synchronize() or optimizer.step() after each backward (or raise "
                    "backward_passes_per_step to accumulate gradients locally)")
        return prehook

    def _rt_count_pass(self, p):
        def hook(*_):
            self._rt_delay[p] -= 1
            self._rt_counted.add(p)
            self._rt_synchronized = False
            if self._rt_delay[p] == 0 and p in self._rt_index:
                self._rt_announce(p)
        return hook

    def _rt_dense_gradient(self, p):
        """p.grad, made dense if it is sparse (sparse_as_dense; made sparse again after)."""
        if p.grad is not None and p.grad.is_sparse:
            self._rt_sparse.add(p)
            return p.grad.to_dense()
        return p.grad

    def _rt_sparse_kept(self, p):
        """Whether p's gradient is sparse and stays so: it is then all-gathered in synchronize()
        (indices and values, as Horovod's sparse all-reduce), not sent through the exchange."""
        if p.grad is not None and p.grad.is_sparse and not self._rt_sparse_as_dense:
            self._rt_gathered.add(p)
            return True
        return False

    def _rt_announce(self, p):
        """p's gradient (zero if it has none) goes to the exchange, from the engine's buffer."""
        if self._rt_sparse_kept(p):
            return
        grad = self._rt_dense_gradient(p)
        view = self._rt_views[p]
        if grad is None:
            view.zero_()
            p.grad = view
        elif grad.data_ptr() != view.data_ptr():
            # Copied once; then backward accumulates there (unless p.grad is set to None again).
            view.copy_(grad)
            if p not in self._rt_sparse:
                p.grad = view
        if self._rt_predivide != 1.0:
            view.mul_(1.0 / self._rt_predivide)
        self._rt_exchange.gradient_ready(self._rt_index[p], view.data_ptr())
        self._rt_announced.add(p)

    def _rt_release_views(self):
        """Each p.grad that is a view of the engine's buffer becomes a copy (before shutdown)."""
        for p, view in self._rt_views.items():
            grad = p.grad
            if grad is not None and not grad.is_sparse and grad.data_ptr() == view.data_ptr():
                p.grad = p.grad.clone()
        self._rt_views = {}

    def _rt_takes_part(self, p):
        """Whether p's gradient is averaged this step. The same on every rank when the script
        sets requires_grad the same way everywhere, whatever gradients backward reached here.
        Size 1: a parameter without a gradient keeps none (Horovod does not hook at size 1)."""
        if p in self._rt_counted:
            return True
        return p.requires_grad and (p.grad is not None or self._rt_set_size > 1)

    def synchronize(self):
        """Waits for every gradient's average. A parameter backward did not reach on this rank
        (another rank's branch, fewer passes than backward_passes_per_step) is announced now,
        with a zero gradient if it has none, so that every rank steps every parameter alike."""
        if not self._rt_included:
            self._rt_reset_step()
            self._rt_synchronized = True
            return
        if self._rt_index:
            for p in self._rt_index:
                if p not in self._rt_announced and p not in self._rt_gathered and \
                        self._rt_takes_part(p):
                    self._rt_announce(p)
            self._rt_exchange.wait()
            for p in self._rt_announced:
                if self._rt_predivide != 1.0:
                    self._rt_views[p].mul_(self._rt_predivide)
                if p in self._rt_sparse:
                    p.grad = self._rt_views[p].to_sparse()
        others = [p for p in self._rt_others
                  if self._rt_takes_part(p) and not self._rt_sparse_kept(p)]
        # CUDA gradients all go out before the first is waited for; CPU ones one at a time.
        started = [(p, self._rt_start_allreduce(p)) for p in others if p.is_cuda]
        for p in others:
            if not p.is_cuda:
                self._rt_finish_allreduce(p, *self._rt_start_allreduce(p))
        for p, (handle, ctx) in started:
            self._rt_finish_allreduce(p, handle, ctx)
        for p in [p for p in self._rt_names if p in self._rt_gathered]:
            p.grad = mpi_ops.sparse_allreduce_async(p.grad, self._rt_names[p], self._rt_op,
                                                    self._rt_process_set)()
        self._rt_reset_step()
        self._rt_synchronized = True

    def _rt_start_allreduce(self, p):
        """p's gradient submitted to the plain all-reduce (parameters off the engine's path);
        returns the handle and the compressor's context."""
        grad = self._rt_dense_gradient(p)
        if grad is None:
            grad = p.grad = torch.zeros_like(p)
        if self._rt_predivide != 1.0:
            grad = grad / self._rt_predivide
        wire, ctx = self._rt_compressor.compress(grad.contiguous())
        handle = mpi_ops.allreduce_async_(wire, name=self._rt_names[p], op=self._rt_op,
                                          process_set=self._rt_process_set)
        return handle, ctx

    def _rt_finish_allreduce(self, p, handle, ctx):
        """p.grad becomes the average _rt_start_allreduce began."""
        average = self._rt_compressor.decompress(mpi_ops.synchronize(handle), ctx)
        if self._rt_predivide != 1.0:
            average = average * self._rt_predivide
        if p in self._rt_sparse:
            p.grad = average.to_sparse()
        else:
            p.grad.copy_(average)

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
            if self._rt_synchronized:
                # Averaged already (and perhaps clipped since): not averaged again.
                warnings.warn(f"{_WHERE}: optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(); use `with optimizer.skip_synchronize(): "
                              "optimizer.step()`")
            else:
                self.synchronize()
        self._rt_synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        """Refused while gradients of this step are counted but not yet synchronized."""
        if self._rt_counted:
            raise AssertionError(f"{_WHERE}: optimizer.zero_grad() called after backward but "
                                 "before optimizer.step() or optimizer.synchronize(): the "
                                 "gradients on their way would be lost; call "
                                 "optimizer.synchronize() first")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _named_parameters(named_parameters, param_groups):
    """The optimizer's parameters as (name, p), in named_parameters' order (Horovod's checks:
    pairs, unique names, every parameter of the optimizer named; others left out)."""
    mine = [p for group in param_groups for p in group["params"]]
    if named_parameters is None:
        return [(f"allreduce.noname.{i}.{j}", p) for i, group in enumerate(param_groups)
                for j, p in enumerate(group["params"])]
    named = list(named_parameters)
    if any(not isinstance(item, tuple) or len(item) != 2 for item in named):
        raise ValueError(f"{_WHERE}: named_parameters must be (name, parameter) pairs, as "
                         "model.named_parameters() gives")
    counts = collections.Counter(name for name, _ in named)
    duplicates = sorted(name for name, n in counts.items() if n > 1)
    if duplicates:
        raise ValueError(f"{_WHERE}: named_parameters has duplicate names: "
                         f"{', '.join(duplicates)}")
    ids = {id(p) for p in mine}
    seen = set()
    kept = []
    for name, p in named:
        if id(p) in ids and id(p) not in seen:
            seen.add(id(p))
            kept.append((name, p))
    if len(seen) != len(ids):
        raise ValueError(f"{_WHERE}: named_parameters lacks {len(ids) - len(seen)} of the "
                         "optimizer's parameters")
    return kept


def _on_engine(name, p):
    """Whether p's gradient takes the engine's exchange (float32 on the CPU). A CUDA
    parameter's takes the all-reduce's GPU path (NCCL) instead, where the build has one."""
    if p.device.type == "cuda":
        if not _ext.nccl_version():
            raise TypeError(f"{_WHERE}: parameter {name} is on {p.device}; this build of "
                            "ringtrain has no GPU path (CPU parameters only)")
        return False
    if p.device.type != "cpu":
        raise TypeError(f"{_WHERE}: parameter {name} is on {p.device}; ringtrain takes CPU and "
                        "CUDA parameters only")
    return p.dtype == torch.float32


_optimizers = weakref.WeakSet()  # every DistributedOptimizer, for shutdown()


def _check_groups(groups, num_groups):
    """Horovod's groups (or the older num_groups), validated. They only shape Horovod's fusion;
    here the engine's buckets decide what travels together, so they change nothing else."""
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups`", DeprecationWarning)
        groups = num_groups if groups is None else groups
    if groups is None:
        return
    if isinstance(groups, list):
        seen = set()
        for group in groups:
            for p in group:
                if not isinstance(p, torch.Tensor):
                    raise ValueError(f"{_WHERE}: groups must be lists of torch.Tensor")
                if id(p) in seen:
                    raise ValueError(f"{_WHERE}: a parameter appears twice in groups")
                seen.add(id(p))
    elif isinstance(groups, bool) or not isinstance(groups, int) or groups < 0:
        raise ValueError(f"{_WHERE}: groups must be a non-negative integer or a list of lists "
                         "of torch.Tensor")


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None):
    """`optimizer` whose step() first averages the gradients over the ranks (Horovod's
    hvd.DistributedOptimizer, with its arguments and meaning). Every rank must wrap the same
    parameters in the same order and set requires_grad alike. compression: Compression.none,
    .fp16 or .bf16 (or a ringtrain.Compression value). gradient_predivide_factor f (op=Average
    only): gradients are scaled by 1/f before the sum and f/size() after. groups/num_groups are
    validated but the engine's own buckets decide what travels together. process_set: a set
    other than the global one averages over its ranks with the all-reduce instead of the
    engine's exchange."""
    if op not in (Average, Sum):
        raise ValueError(f"{_WHERE}: op must be Average or Sum")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError(f"{_WHERE}: gradient_predivide_factor needs op=Average")
    if gradient_predivide_factor <= 0:
        raise ValueError(f"{_WHERE}: gradient_predivide_factor must be > 0")
    if backward_passes_per_step <= 0:
        raise ValueError(f"{_WHERE}: backward_passes_per_step must be > 0")
    _check_groups(groups, num_groups)
    compressor = _compressor(compression, "DistributedOptimizer")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compressor, backward_passes_per_step,
               op, gradient_predivide_factor, sparse_as_dense, process_set)
