"""Where the PyTorch reference ranks meet: a torch.distributed FileStore, never a TCP port.

A port picked at random can be taken by another job or by an outgoing connection (Linux hands out
32768-60999), and then the reference fails at random; a fresh file cannot be taken.
"""
import os
import tempfile


def init_method(path=None):
    """The init_method URL for torch.distributed.init_process_group.

    PATH must not exist yet and every rank must name the same one. Without it, under Open MPI the
    job's PMIx namespace names it (the same on all its ranks, new for each mpirun)."""
    if not path:
        job = os.environ.get("PMIX_NAMESPACE")
        if not job:
            raise SystemExit("rendezvous: give --rendezvous FILE (no PMIX_NAMESPACE to name one)")
        path = os.path.join(tempfile.gettempdir(), f"torch-rendezvous-{os.getuid()}-{job}")
    return "file://" + os.path.abspath(path)

