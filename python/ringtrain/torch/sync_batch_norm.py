"""Horovod's SyncBatchNorm: batch statistics over every rank's batch (tested on CPU tensors; on
CUDA ones its all-gather and all-reduce take the collectives' NCCL path, not yet run on GPUs).

In training on several ranks, the mean and variance of each channel are those of the global
batch (the ranks' batches together, whose sizes may differ), and backward gives each rank the
input gradient of the global batch norm; the weight and bias gradients stay this rank's share
(DistributedOptimizer sums them, as in Horovod). In eval, or on one rank, it is BatchNorm.
"""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from .mpi_ops import Sum, allgather, allreduce_, size


class SyncBatchNorm(_BatchNorm):
    """Horovod's hvd.SyncBatchNorm(num_features, eps, momentum, affine, track_running_stats);
    input (N, C, ...). Training on several ranks is collective: every rank calls forward and
    backward."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"ringtrain.torch.SyncBatchNorm: expected at least 2D input "
                             f"(got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        tracking = self.training and self.track_running_stats
        factor = 0.0  # the running statistics' factor: momentum, or cumulative when None
        if tracking:
            self.num_batches_tracked.add_(1)
            factor = self.momentum
            if factor is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or not self.track_running_stats
        if not use_batch or size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, use_batch, factor, self.eps)
        return _SyncBatchNorm.apply(input, self.weight, self.bias,
                                    self.running_mean if tracking else None,
                                    self.running_var if tracking else None, self.eps, factor)


def _channels_last(x):
    """x (N, C, ...) as (rows, C): every element of a channel in one column."""
    return x.transpose(0, 1).reshape(x.shape[1], -1).t()


def _per_channel(v, like):
    """A (C,) vector shaped to broadcast against `like` (N, C, ...)."""
    return v.view((1, -1) + (1,) * (like.dim() - 2))


def _global_statistics(x):
    """(count, mean, biased variance) of each channel over every rank's x, in float64: each
    rank's count, mean and sum of squared deviations gathered, then combined exactly."""
    rows = _channels_last(x).double()
    count = rows.shape[0]
    mean = rows.mean(0) if count else rows.new_zeros(rows.shape[1])
    m2 = ((rows - mean) ** 2).sum(0)
    mine = torch.cat([torch.tensor([float(count)], dtype=torch.float64), mean, m2])
    every = allgather(mine.unsqueeze(0))  # (size, 1 + 2C)
    counts, means, m2s = every[:, :1], every[:, 1:1 + mean.numel()], every[:, 1 + mean.numel():]
    total = counts.sum()
    if total == 0:
        raise ValueError("ringtrain.torch.SyncBatchNorm: every rank's batch is empty")
    global_mean = (counts * means).sum(0) / total
    global_m2 = (m2s + counts * (means - global_mean) ** 2).sum(0)
    return total, global_mean, global_m2 / total


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum):
        total, mean, var = _global_statistics(input)
        if running_mean is not None:
            unbiased = var * total / max(float(total) - 1, 1.0)
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        invstd = torch.rsqrt(var + eps)
        xhat = (input.double() - _per_channel(mean, input)) * _per_channel(invstd, input)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.total = total
        out = xhat
        if weight is not None:
            out = out * _per_channel(weight.double(), input) + _per_channel(bias.double(), input)
        return out.to(input.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        """dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), the means over the global
        batch (one Sum all-reduce of both sums); weight and bias: this rank's sums."""
        xhat, weight, invstd = ctx.saved_tensors
        dy = grad_output.double()
        sum_dy = _channels_last(dy).sum(0)
        sum_dy_xhat = _channels_last(dy * xhat).sum(0)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            sums = allreduce_(torch.cat([sum_dy, sum_dy_xhat]), op=Sum,
                              name="sync_batch_norm.sums")
            mean_dy, mean_dy_xhat = (sums / ctx.total).split(sum_dy.numel())
            scale = invstd if weight is None else invstd * weight.double()
            grad_input = _per_channel(scale, dy) * (
                dy - _per_channel(mean_dy, dy) - xhat * _per_channel(mean_dy_xhat, dy))
            grad_input = grad_input.to(grad_output.dtype)
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        if weight is not None and ctx.needs_input_grad[2]:
            grad_bias = sum_dy.to(weight.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None
