"""Horovod's gradient compression (horovod.torch.compression): compressor classes.

Compression.none and Compression.fp16 are Horovod's compressor classes (static compress and
decompress); Compression.bf16 is ringtrain's extra. DistributedOptimizer does not call them on the
engine's path: each class names the engine's own 16-bit wire (`engine`), where the buckets are
accumulated in float32 at every hop. compress/decompress serve the gradients that go through the
plain collectives (parameters that are not float32) and any caller of the classes.
"""
import torch

from ringtrain import _ringtrain as _ext


class Compressor:
    """Interface: compress(tensor) -> (tensor, ctx); decompress(tensor, ctx) -> tensor."""
    engine = None  # the engine's _ext.Compression for this compressor (None: it has none)

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """The tensor as it is (the default)."""
    engine = _ext.Compression.none

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


def _cast_compressor(dtype, wire):
    """A compressor class that sends floating-point tensors as `dtype` (others as they are)."""
    class Cast(Compressor):
        engine = wire

        @staticmethod
        def compress(tensor):
            if tensor.dtype.is_floating_point:
                return tensor.to(dtype), tensor.dtype
            return tensor, tensor.dtype

        @staticmethod
        def decompress(tensor, ctx):
            return tensor.to(ctx) if ctx.is_floating_point else tensor
    return Cast


class FP16Compressor(_cast_compressor(torch.float16, _ext.Compression.fp16)):
    """Floating-point tensors as float16 on the wire, back to their own type after."""


class BF16Compressor(_cast_compressor(torch.bfloat16, _ext.Compression.bf16)):
    """Floating-point tensors as bfloat16 on the wire (ringtrain's extra)."""


class Compression:
    """How gradients cross the wire: DistributedOptimizer(..., compression=Compression.fp16)."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor


_BY_ENGINE = {_ext.Compression.none: NoneCompressor, _ext.Compression.fp16: FP16Compressor,
              _ext.Compression.bf16: BF16Compressor}


def _compressor(compression, call):
    """The compressor class for a Compression class or an engine value (ringtrain.Compression)."""
    if isinstance(compression, _ext.Compression):
        return _BY_ENGINE[compression]
    if compression in _BY_ENGINE.values():
        return compression
    raise ValueError(f"ringtrain.torch.{call}: compression {compression!r} is not one the engine "
                     "has: Compression.none, Compression.fp16 or Compression.bf16")
