"""PyTorch's DistributedDataParallel on ringtrain: the communication hook and a gloo group."""
import torch

from ringtrain import _ringtrain as _ext

from . import _worker
from .mpi_ops import Average, Error, _TYPES, _checked, broadcast_, local_size, rank, size


def allreduce_hook(state, bucket):
    """DDP communication hook: ddp.register_comm_hook(None, rt.allreduce_hook). Averages each
    DDP bucket with ringtrain's all-reduce on the worker thread (_worker: in the order DDP hands
    the buckets over, the same on every rank), so that backward goes on while the bucket
    travels, and returns the future DDP waits for."""
    tensor = _checked(bucket.buffer(), "allreduce_hook")  # a call before init() fails here
    future = torch.futures.Future()

    def job():
        try:
            _ext.allreduce_address(tensor.data_ptr(), tensor.numel(), _TYPES[tensor.dtype],
                                   Average)
        except BaseException as error:  # noqa: B902 - handed to DDP's wait
            future.set_exception(error)
        else:
            future.set_result(tensor)
    _worker.submit(job)
    return future


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
