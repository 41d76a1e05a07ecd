"""ringtrain.torch's GPU path as a machine without a GPU sees it (CI runs this): nccl_built() and
cuda_built() tell the truth for the build (against CMake's own record of it); the CPU path works as
before beside them; a tensor or a DistributedOptimizer parameter on CUDA in a build without the
GPU path, or on a device that ringtrain does not take, gets one clear error naming the call. A
CUDA tensor is stood for by a CPU tensor whose `device` says cuda:0, so that a machine without a
GPU (or a torch without CUDA) checks the refusal too. Exits 77 (SKIP) without python3-torch."""
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed", flush=True)
    sys.exit(77)

import ringtrain
import ringtrain.torch as hvd
from ringtrain import _build_config
from ringtrain.torch import optimizer as _optimizer
from rank_checks import Checks, error_text

check = Checks(lambda: f"rank {hvd.rank()}/{hvd.size()}")


class SaysCuda(torch.Tensor):
    """A CPU tensor that says it is on cuda:0, where ringtrain.torch looks."""

    @property
    def device(self):
        return torch.device("cuda", 0)


def main():
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    version = hvd.nccl_built()
    check(isinstance(version, int) and hvd.cuda_built() == (version > 0),
          f"nccl_built() = {version} and cuda_built() = {hvd.cuda_built()} agree")
    check(hvd.cuda_built() == _build_config.GPU_PATH,
          f"cuda_built() is the build's (GPU path {_build_config.GPU_PATH})")
    check(version == 0 or version >= 20000, "nccl_built() is NCCL's version code")

    average = hvd.allreduce(torch.full((5,), float(r)), name="cpu.average")
    check(not average.is_cuda and torch.equal(average, torch.full((5,), (n - 1) / 2)),
          "a CPU all-reduce is unchanged")
    gathered = hvd.allgather(torch.full((r + 1,), r, dtype=torch.int32), name="cpu.gather")
    check(not gathered.is_cuda and gathered.numel() == n * (n + 1) // 2,
          "a CPU all-gather of uneven rows is unchanged")

    meta = error_text(ValueError, lambda: hvd.allreduce(torch.zeros(3, device="meta")))
    check("ringtrain.torch.allreduce_async" in meta and "CPU and CUDA tensors only" in meta,
          f"a tensor on meta: a clear error naming the call ({meta})")
    cuda = torch.zeros(3).as_subclass(SaysCuda)
    if hvd.cuda_built():
        print(f"note: this build has the GPU path (NCCL {version}); torch.cuda.is_available() = "
              f"{torch.cuda.is_available()}: torch_cuda_test.py checks CUDA tensors where it is "
              "true, api_mpi_tests the refusal of host memory as device memory", flush=True)
    else:
        text = error_text(ValueError, lambda: hvd.allreduce(cuda, name="says.cuda"))
        check("ringtrain.torch.allreduce_async" in text and "no GPU path" in text,
              f"a CUDA tensor in a build without the GPU path: a clear error ({text})")
        text = error_text(ValueError, lambda: hvd.broadcast_(cuda, 0, name="says.cuda.bcast"))
        check("ringtrain.torch.broadcast_async_" in text and "no GPU path" in text,
              f"broadcast_ of a CUDA tensor: the same error ({text})")
        text = error_text(TypeError, lambda: _optimizer._on_engine("w", cuda))
        check("DistributedOptimizer" in text and "no GPU path" in text,
              f"a CUDA parameter of DistributedOptimizer: a clear error ({text})")
    hvd.barrier()
    ringtrain.shutdown()
    print(f"rank {r}: {'ALL OK' if not check.failures else f'{check.failures} FAILED'}", flush=True)
    check.exit()


main()
