"""ringtrain's engine for Python: collectives on NumPy arrays and the bucketed gradient exchange.

    import ringtrain, numpy as np
    ringtrain.init()
    a = np.ones(10, dtype=np.float32)
    ringtrain.allreduce_(a)            # in place: the average over the ranks

For PyTorch, ``import ringtrain.torch as rt`` (Horovod's names). Launch with
``mpirun -np N python3 script.py``.
"""
import atexit as _atexit
import ctypes as _ctypes
import os as _os

from . import _build_config

# Open MPI opens its components with dlopen and expects libmpi's symbols to be global; a Python
# extension's libraries are loaded with local symbols. Load libmpi globally first, as mpi4py does.
try:
    _ctypes.CDLL(_build_config.MPI_LIBRARY, mode=_os.RTLD_NOW | _ctypes.RTLD_GLOBAL)
except OSError:  # the extension's own dependency resolution will say what is missing
    pass

from . import _ringtrain  # noqa: E402
from ._ringtrain import Backend, Compression, DataType, Error, GradientExchange, ReduceOp  # noqa: E402,F401

rank = _ringtrain.rank
size = _ringtrain.size
local_rank = _ringtrain.local_rank
local_size = _ringtrain.local_size
shutdown = _ringtrain.shutdown
started = _ringtrain.started
barrier = _ringtrain.barrier

_atexit.register(_ringtrain.shutdown)


def init(backend=None, compression=None, fusion_threshold_bytes=None, overlap=None,
         tuning_file=None, stall_timeout_seconds=None):
    """Joins the job mpirun started (once; later calls do nothing). Arguments override the
    defaults, and the RINGTRAIN_* variables override both, as `ringtrain train` reads them.
    backend and compression take names ("ring", "fp16") or the enums."""
    if _ringtrain.started():
        return
    if isinstance(backend, str):
        backend = _named(Backend, backend, "backend")
    if isinstance(compression, str):
        compression = _named(Compression, compression, "compression")
    _ringtrain.start(backend, compression, fusion_threshold_bytes, overlap, tuning_file,
                     stall_timeout_seconds)


def _named(enum, name, what):
    try:
        return enum.__members__[name]
    except KeyError:
        raise ValueError(f"ringtrain.init: {what} {name!r}: expected one of "
                         f"{', '.join(enum.__members__)}") from None


def _require_started(call):
    if not _ringtrain.started():
        raise Error(f"ringtrain.{call} called before ringtrain.init()")


_NUMPY_TYPES = {"float32": DataType.float32, "float64": DataType.float64,
                "float16": DataType.float16, "int32": DataType.int32, "int64": DataType.int64}
_OPS = {"average": ReduceOp.average, "sum": ReduceOp.sum, "min": ReduceOp.min,
        "max": ReduceOp.max}


def _numpy_buffer(array, call):
    """(address, count, DataType) of a C-contiguous, writable NumPy array; one clear error else."""
    import numpy
    if not isinstance(array, numpy.ndarray):
        raise TypeError(f"ringtrain.{call}: expected a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.name not in _NUMPY_TYPES:
        raise TypeError(f"ringtrain.{call}: dtype {array.dtype.name} is not supported "
                        f"(one of {', '.join(_NUMPY_TYPES)})")
    if not array.flags.c_contiguous or not array.flags.writeable:
        raise ValueError(f"ringtrain.{call}: the array must be C-contiguous and writable")
    return array.ctypes.data, array.size, _NUMPY_TYPES[array.dtype.name]


def allreduce_(array, op="average"):
    """In place: every element becomes op ("average", "sum", "min", "max") over the ranks."""
    _require_started("allreduce_")
    if op not in _OPS:
        raise ValueError(f"ringtrain.allreduce_: op {op!r}: expected one of {', '.join(_OPS)}")
    address, count, dtype = _numpy_buffer(array, "allreduce_")
    _ringtrain.allreduce_address(address, count, dtype, _OPS[op])
    return array


def broadcast_(array, root_rank=0):
    """In place: root_rank's array into every rank's."""
    _require_started("broadcast_")
    address, count, dtype = _numpy_buffer(array, "broadcast_")
    _ringtrain.broadcast_address(address, count, dtype, root_rank)
    return array
