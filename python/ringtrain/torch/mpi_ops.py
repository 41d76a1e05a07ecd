"""Horovod's collectives (horovod.torch.mpi_ops) on ringtrain's named operations.

Every operation is submitted to the engine under a name and matched across ranks by it, as
Horovod's are: ranks may submit in different orders, all-reduces ready together are fused, and
ranks that disagree (type, shape, op, root) get one error on every rank from synchronize(). An
unnamed operation gets "<kind>.noname.<n>", counted per kind and process set, so unnamed calls
must come in the same order on every rank (as in Horovod). The *_async functions return a
handle; synchronize(handle) returns the result. The others are autograd functions: gradients
flow through them as Horovod defines.

CPU tensors take the engine's host path. CUDA tensors (builds with the GPU path: nccl_built())
take NCCL over the process set's ranks, one GPU per rank: the engine's NCCL stream waits, on the
device, for an event recorded on the tensor's current stream at submit, and results lie on the
input's device when synchronize() returns. Ranks must agree on CPU or CUDA for each operation.
int16 has no GPU path (NCCL lacks it), nor does join() stand in for CUDA all-reduces.
"""
import collections
import itertools
import threading

import torch

import ringtrain as _ringtrain
from ringtrain import _ringtrain as _ext

# The public names (what `from .mpi_ops import *` gives ringtrain.torch): Horovod's, no modules.
__all__ = [
    "Adasum", "Average", "Error", "HorovodInternalError", "Max", "Min", "ProcessSet", "Product",
    "Sum", "add_process_set", "allgather", "allgather_async", "allreduce", "allreduce_",
    "allreduce_async", "allreduce_async_", "alltoall", "alltoall_async", "barrier", "broadcast",
    "broadcast_", "broadcast_async", "broadcast_async_", "ccl_built", "cross_rank",
    "cross_size", "cuda_built", "ddl_built", "global_process_set", "gloo_built", "gloo_enabled",
    "grouped_allgather", "grouped_allgather_async", "grouped_allreduce", "grouped_allreduce_",
    "grouped_allreduce_async", "grouped_allreduce_async_", "grouped_reducescatter",
    "grouped_reducescatter_async", "init", "is_homogeneous", "is_initialized", "join",
    "local_rank", "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported",
    "nccl_built", "poll", "rank", "reducescatter", "reducescatter_async", "remove_process_set",
    "rocm_built", "size", "sparse_allreduce_async", "start_timeline", "stop_timeline",
    "synchronize",
]

Error = _ext.Error
HorovodInternalError = _ext.Error
Average = _ext.ReduceOp.average
Sum = _ext.ReduceOp.sum
Min = _ext.ReduceOp.min
Max = _ext.ReduceOp.max
Product = _ext.ReduceOp.product
Adasum = "Adasum"  # accepted as a name; refused by every operation (not implemented)

_Kind = _ext.OperationKind
_TYPES = {torch.float32: _ext.DataType.float32, torch.float64: _ext.DataType.float64,
          torch.float16: _ext.DataType.float16, torch.bfloat16: _ext.DataType.bfloat16,
          torch.int32: _ext.DataType.int32, torch.int64: _ext.DataType.int64,
          torch.uint8: _ext.DataType.uint8, torch.int8: _ext.DataType.int8,
          torch.int16: _ext.DataType.int16, torch.bool: _ext.DataType.bool}

# ---- the job ----

is_initialized = _ringtrain.started
rank = _ringtrain.rank
size = _ringtrain.size
local_rank = _ringtrain.local_rank
local_size = _ringtrain.local_size


def init(comm=None, process_sets=None, **options):
    """Joins the job mpirun started (Horovod's hvd.init()). `options` are ringtrain.init()'s
    (backend, compression, ...). process_sets: ProcessSet objects to add at once."""
    if comm is not None:
        raise ValueError("ringtrain.torch.init: comm is not supported (every rank of mpirun's job "
                         "takes part; use process sets for subsets)")
    _ringtrain.init(**options)
    global_process_set.ranks = list(range(size()))
    for process_set in process_sets or []:
        add_process_set(process_set)


def cross_size():
    """The number of nodes (ranks on one node are assumed to be as many on each)."""
    return size() // local_size()


def cross_rank():
    return rank() // local_size()


def is_homogeneous():
    return size() % local_size() == 0


def mpi_threads_supported():
    return True


def mpi_enabled():
    return True


def mpi_built():
    return True


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    """NCCL's version code (22809 for 2.28.9) where this build takes CUDA tensors, else 0."""
    return _ext.nccl_version()


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """Whether this build takes CUDA tensors (through NCCL)."""
    return _ext.nccl_version() > 0


def rocm_built():
    return False


# ---- process sets ----

class ProcessSet:
    """Ranks that run collectives together (Horovod's ProcessSet). Operations take it as
    process_set=; roots stay world ranks."""

    def __init__(self, ranks):
        if not all(isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet takes a list of ranks (mpi4py communicators are not "
                             "supported)")
        self.ranks = sorted(ranks)
        self.process_set_id = None

    def size(self):
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        if self.process_set_id is None:
            return None
        return self.ranks.index(rank()) if rank() in self.ranks else -1

    def included(self):
        return None if self.ranks is None else rank() in self.ranks

    def __str__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def add_process_set(process_set):
    """Collective over every rank: adds the set (a ProcessSet or a list of ranks), returns it."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    for known in _ext.process_set_ids():
        if _ext.process_set_ranks(known) == process_set.ranks:
            raise ValueError(f"Attempted to add a duplicate process set: {process_set}")
    process_set.process_set_id = _ext.add_process_set(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    """Collective over every rank: removes the set; False if it was not there."""
    if process_set.process_set_id in (None, 0):
        return False
    if process_set.process_set_id not in _ext.process_set_ids():
        return False
    _ext.remove_process_set(process_set.process_set_id)
    process_set.process_set_id = None
    return True


# ---- handles ----

_Pending = collections.namedtuple("_Pending", "kind keep output finish")
_handles = {}
_names = collections.defaultdict(itertools.count)
_lock = threading.Lock()


def _name(kind, name, process_set):
    if name is not None:
        return name
    with _lock:
        return f"{kind.name}.noname.{next(_names[(kind.name, process_set.process_set_id)])}"


def _checked(tensor, call):
    where = f"ringtrain.torch.{call}"
    if not _ext.started():
        raise Error(f"{where} called before ringtrain.torch.init()")
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{where}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type == "cuda":
        if not _ext.nccl_version():
            raise ValueError(f"{where}: tensor on {tensor.device}: this build of ringtrain has "
                             "no GPU path (CPU tensors only)")
    elif tensor.device.type != "cpu":
        raise ValueError(f"{where}: tensor on {tensor.device}: ringtrain takes CPU and CUDA "
                         "tensors only")
    if tensor.layout != torch.strided:
        raise ValueError(f"{where}: sparse tensors are not supported (use sparse_as_dense)")
    if tensor.dtype not in _TYPES:
        raise TypeError(f"{where}: dtype {tensor.dtype} is not supported "
                        f"({', '.join(str(t) for t in _TYPES)})")
    return tensor.detach().contiguous()


def _op_of(op, average, call):
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if op is None:
        op = Average if average in (None, True) else Sum
    if op == Adasum:
        raise NotImplementedError(f"ringtrain.torch.{call}: Adasum is not implemented")
    return op


def _ready_event(tensor):
    """For a CUDA tensor: an event recorded on its device's current stream, after the work
    that writes it; the engine's NCCL stream waits for it on the device. None otherwise."""
    if not tensor.is_cuda:
        return None
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(tensor.device))
    return event


def _submit(kind, tensor, name, process_set, output=None, op=Average, prescale=1.0,
            postscale=1.0, root=0, splits=(), finish=None):
    event = _ready_event(tensor)
    handle = _ext.submit(kind, _name(kind, name, process_set), _TYPES[tensor.dtype],
                         list(tensor.shape), tensor.data_ptr(),
                         0 if output is None else output.data_ptr(), op, float(prescale),
                         float(postscale), int(root), [int(s) for s in splits],
                         process_set.process_set_id,
                         device=tensor.device.index if tensor.is_cuda else -1,
                         ready_event=event.cuda_event if event is not None else 0)
    # The tensors (and the event) live until synchronize(): the engine reads and writes them.
    _handles[handle] = _Pending(kind, (tensor, output, event), output, finish)
    return handle


def poll(handle):
    """Whether synchronize(handle) would return at once."""
    return _ext.poll(handle)


def synchronize(handle):
    """Waits for the operation and returns its result."""
    pending = _handles.pop(handle, None)
    if pending is None:
        raise ValueError(f"ringtrain.torch.synchronize: unknown handle {handle}")
    tensor = pending.keep[0]
    shape, data, received, last_joined, on_device = _ext.wait(handle, tensor.element_size())
    if pending.kind == _Kind.join:
        return last_joined
    if pending.output is not None:
        result = pending.output
    elif pending.kind == _Kind.barrier:
        return None
    elif tensor.is_cuda:
        # Device memory the engine allocated and filled; the tensor keeps it alive.
        result = torch.as_tensor(on_device, device=tensor.device).view(tensor.dtype).view(shape) \
            if on_device is not None else torch.empty(shape, dtype=tensor.dtype,
                                                      device=tensor.device)
    else:
        dtype = tensor.dtype
        result = torch.from_numpy(data).view(dtype).view(shape) if len(data) else \
            torch.empty(shape, dtype=dtype)
    if pending.finish is not None:
        return pending.finish(result, received)
    return result


# ---- all-reduce ----

def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    op = _op_of(op, average, "allreduce_async")
    tensor = _checked(tensor, "allreduce_async")
    output = torch.empty_like(tensor)
    return _submit(_Kind.allreduce, tensor, name, process_set, output, op, prescale_factor,
                   postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    op = _op_of(op, average, "allreduce_async_")
    _checked(tensor, "allreduce_async_")
    if not tensor.is_contiguous():
        raise ValueError("ringtrain.torch.allreduce_async_: the tensor must be contiguous")
    return _submit(_Kind.allreduce, tensor, name, process_set, tensor, op, prescale_factor,
                   postscale_factor)


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(allreduce_async(tensor, None, name, op, prescale, postscale,
                                           process_set))

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale, process_set = ctx.args
        return (allreduce(grad, op=op, prescale_factor=prescale, postscale_factor=postscale,
                          process_set=process_set), None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """A new tensor: op over the ranks of the set (Average unless op or average says)."""
    op = _op_of(op, average, "allreduce")
    if compression is not None and hasattr(compression, "compress"):
        compressed, context = compression.compress(tensor)
        reduced = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                                   process_set)
        return compression.decompress(reduced, context)
    return _Allreduce.apply(tensor, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In place."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _group_names(name, count, kind, process_set):
    base = _name(kind, name, process_set)
    return [f"{base}.{i}" for i in range(count)]


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    names = _group_names(name, len(tensors), _Kind.allreduce, process_set)
    return [allreduce_async(t, average, n, op, prescale_factor, postscale_factor, process_set)
            for t, n in zip(tensors, names)]


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    names = _group_names(name, len(tensors), _Kind.allreduce, process_set)
    return [allreduce_async_(t, average, n, op, prescale_factor, postscale_factor, process_set)
            for t, n in zip(tensors, names)]


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    op = _op_of(op, average, "grouped_allreduce")
    names = _group_names(name, len(tensors), _Kind.allreduce, process_set)
    return [allreduce(t, None, n, compression, op, prescale_factor, postscale_factor,
                      process_set) for t, n in zip(tensors, names)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    handles = grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                       postscale_factor, process_set)
    return [synchronize(h) for h in handles]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """A sparse tensor's all-reduce as Horovod does it: every rank's indices and values are
    all-gathered (duplicates left uncoalesced, so they add up when used). Returns a function
    that waits and returns the sparse result."""
    op = _op_of(op, None, "sparse_allreduce_async")
    if op not in (Average, Sum):
        raise ValueError("ringtrain.torch.sparse_allreduce_async: op must be Average or Sum")
    indices = allgather_async(tensor._indices().t().contiguous(), f"{name}.indices", process_set)
    values = allgather_async(tensor._values(), f"{name}.values", process_set)

    def result():
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op == Average:
            gathered_values = gathered_values / len(_ext.process_set_ranks(
                process_set.process_set_id))
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, tensor.size())
    return result


# ---- all-gather ----

def allgather_async(tensor, name=None, process_set=global_process_set):
    tensor = _checked(tensor, "allgather_async")
    if tensor.dim() == 0:
        tensor = tensor.reshape(1)
    return _submit(_Kind.allgather, tensor, name, process_set)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows, ctx.process_set = (tensor.shape[0] if tensor.dim() else 1), process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average, process_set=ctx.process_set)
        rows = allgather(torch.tensor([ctx.rows], dtype=torch.int64),
                         process_set=ctx.process_set)
        offset = int(rows[:_set_rank(ctx.process_set)].sum())
        return reduced.narrow(0, offset, ctx.rows), None, None


def _set_rank(process_set):
    ranks = _ext.process_set_ranks(process_set.process_set_id)
    return ranks.index(rank())


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along dimension 0 (which may differ from rank to rank)."""
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    names = _group_names(name, len(tensors), _Kind.allgather, process_set)
    return [allgather_async(t, n, process_set) for t, n in zip(tensors, names)]


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    names = _group_names(name, len(tensors), _Kind.allgather, process_set)
    return [allgather(t, n, process_set) for t, n in zip(tensors, names)]


# ---- broadcast ----

def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    tensor = _checked(tensor, "broadcast_async")
    output = tensor.clone() if rank() == root_rank else torch.empty_like(tensor)
    return _submit(_Kind.broadcast, tensor, name, process_set, output, root=root_rank)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    _checked(tensor, "broadcast_async_")
    if not tensor.is_contiguous():
        raise ValueError("ringtrain.torch.broadcast_async_: the tensor must be contiguous")
    return _submit(_Kind.broadcast, tensor, name, process_set, tensor, root=root_rank)


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new tensor holding root_rank's tensor (a world rank in the set)."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In place."""
    with torch.no_grad():
        return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- all-to-all ----

def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    tensor = _checked(tensor, "alltoall_async")
    if splits is None:
        split_list = []
    else:
        if isinstance(splits, torch.Tensor):
            if splits.dtype not in (torch.int32, torch.int64) or splits.dim() > 1:
                raise ValueError("ringtrain.torch.alltoall: splits must be a 1-d tensor of "
                                 "integers")
            splits = splits.tolist()
        split_list = [int(s) for s in splits]

    def finish(result, received):
        return result, torch.tensor(received, dtype=torch.int32)
    return _submit(_Kind.alltoall, tensor, name, process_set, splits=split_list, finish=finish)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        result, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received, ctx.process_set = received, process_set
        ctx.mark_non_differentiable(received)
        return result, received

    @staticmethod
    def backward(ctx, grad, *_):
        back, _ = alltoall(grad.contiguous(), splits=ctx.received, process_set=ctx.process_set)
        return back, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows of dimension 0 scattered by splits (equal parts when None) and gathered from every
    rank; returns the tensor, and with splits given also the rows received from each rank."""
    result, received = _Alltoall.apply(tensor, splits, name, process_set)
    return result if splits is None else (result, received)


# ---- reduce-scatter ----

def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    op = _op_of(op, None, "reducescatter_async")
    tensor = _checked(tensor, "reducescatter_async")
    return _submit(_Kind.reducescatter, tensor, name, process_set, op=op,
                   prescale=prescale_factor, postscale=postscale_factor)


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale, postscale):
        ctx.args = (op, process_set, prescale, postscale)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale,
                                               postscale))

    @staticmethod
    def backward(ctx, grad):
        op, process_set, prescale, postscale = ctx.args
        grad = grad * (len(_ext.process_set_ranks(process_set.process_set_id)) if op == Sum
                       else 1) * prescale * postscale
        return allgather(grad, process_set=process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """op over the ranks, cut along dimension 0: the first ranks get one row more where the
    rows do not split evenly."""
    return _Reducescatter.apply(tensor, name, op, process_set, prescale_factor,
                                postscale_factor)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    names = _group_names(name, len(tensors), _Kind.reducescatter, process_set)
    return [reducescatter_async(t, n, op, process_set, prescale_factor, postscale_factor)
            for t, n in zip(tensors, names)]


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    names = _group_names(name, len(tensors), _Kind.reducescatter, process_set)
    return [reducescatter(t, n, compression, op, process_set, prescale_factor, postscale_factor)
            for t, n in zip(tensors, names)]


# ---- barrier and join ----

_nothing = torch.zeros(0)


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called it."""
    synchronize(_submit(_Kind.barrier, _nothing, None, process_set))


def join(device=-1):
    """This rank has no more data: until every rank has joined, it stands in with zeros for
    the all-reduces the others run on CPU tensors (a CUDA all-reduce that a joined rank would
    stand in for fails on every rank instead; `device` is accepted and ignored). Returns the rank
    that joined last, the same on every rank."""
    return synchronize(_submit(_Kind.join, _nothing, "join", global_process_set))


# ---- timeline ----

def start_timeline(file_path, mark_cycles=False):
    """Collective: records every operation's run on every rank until stop_timeline(), which
    writes one Chrome trace (chrome://tracing, ui.perfetto.dev) to file_path from rank 0.
    mark_cycles is accepted and ignored."""
    _ext.start_timeline(str(file_path))


def stop_timeline():
    """Collective: writes the trace start_timeline() began."""
    _ext.stop_timeline()
