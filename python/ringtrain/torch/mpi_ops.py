"""Horovod's collectives on ringtrain's engine (the functions of horovod.torch.mpi_ops)."""
import torch

import ringtrain as _ringtrain
from ringtrain import _ringtrain as _ext

Average = _ext.ReduceOp.average
Sum = _ext.ReduceOp.sum
Min = _ext.ReduceOp.min
Max = _ext.ReduceOp.max
Error = _ext.Error

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
