"""Horovod's PyTorch API on ringtrain's engine: a Horovod script changes only its import.

    import ringtrain.torch as rt
    rt.init()
    rt.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = rt.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    rt.broadcast_optimizer_state(opt, root_rank=0)

The collectives (mpi_ops) are matched across ranks by name, as Horovod's are. DistributedOptimizer
(optimizer) hooks each parameter's gradient: as backward finishes it, its bucket goes to the
engine's communication thread, which averages while backward goes on; step() waits for the
averages and then steps. CUDA tensors take NCCL where the build has the GPU path (nccl_built());
a CUDA model's gradients are averaged in synchronize(). A script that keeps
DistributedDataParallel calls init_process_group() and registers allreduce_hook instead (ddp),
or uses torch.distributed's backend "ringtrain" that this import registers (c10d).
"""
import torch.distributed as _torch_distributed

import ringtrain as _ringtrain

from .compression import Compression  # noqa: F401
from . import _worker
from .ddp import allreduce_hook, init_process_group  # noqa: F401
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,  # noqa: F401
                        broadcast_parameters)
from .mpi_ops import *  # noqa: F401,F403
from .mpi_ops import Error  # noqa: F401
from .optimizer import DistributedOptimizer, _optimizers  # noqa: F401
from .sync_batch_norm import SyncBatchNorm  # noqa: F401

if _torch_distributed.is_available():  # the backend "ringtrain" of torch.distributed (c10d)
    from . import c10d as _c10d
    _c10d._register()


def shutdown():
    """Ends the job's use of ringtrain (Horovod's hvd.shutdown())."""
    _worker.stop()
    for optimizer in list(_optimizers):
        optimizer._rt_release_views()
    _ringtrain.shutdown()
