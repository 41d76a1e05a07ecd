"""PyTorch's DistributedDataParallel on ringtrain: the communication hook and a gloo group."""
import queue
import threading

import torch

from ringtrain import _ringtrain as _ext

from .mpi_ops import Average, Error, _TYPES, _checked, broadcast_, local_size, rank, size


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
                _ext.allreduce_address(tensor.data_ptr(), tensor.numel(), _TYPES[tensor.dtype],
                                       Average)
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
        _checked(bucket.buffer(), "allreduce_hook")  # a call before init() fails here, at once
        _hook_worker = _HookWorker()
    return _hook_worker.submit(bucket.buffer())


def _stop_hook_worker():
    global _hook_worker
    if _hook_worker is not None:
        _hook_worker.stop()
        _hook_worker = None

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
