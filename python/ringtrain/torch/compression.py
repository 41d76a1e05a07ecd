"""Horovod's gradient compression (horovod.torch.compression)."""
from ringtrain import _ringtrain as _ext


class Compression:
    """How gradient buckets cross the wire (accumulated in float32 at every hop)."""
    none = _ext.Compression.none
    fp16 = _ext.Compression.fp16
    bf16 = _ext.Compression.bf16
