"""Batch-invariant layers, so a request's denoising step gives the same bits whether the executor
runs it alone or merged with other requests' steps (cluster.scheduling.batching).

On CPU, a GEMM picks its kernel (and so its summation order) by the problem size, so the same sample
can round differently inside a bigger batch. Checked layer by layer on the UNet and Flux families at
batch 2 to 32: the [batch, features] projections (time embedding, modulation) differ from batch 2 on,
1x1 convolutions (one GEMM over batch x pixels) at 16 and above; norms, attention and the token-wise
projections did not differ. So a 2-D linear input is multiplied row by row and a convolution runs one
sample at a time: the same call at any batch size. The cost is per-call overhead, small next to a
real model's convolutions; batching still pays through the rest of the network (`bench batching`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BatchInvariantConv2d(nn.Conv2d):
    """nn.Conv2d run one sample at a time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[0] == 1:
            return self._conv_forward(x, self.weight, self.bias)
        return torch.cat([self._conv_forward(sample, self.weight, self.bias) for sample in x.split(1)])


class BatchInvariantLinear(nn.Linear):
    """nn.Linear whose rows of a 2-D input are computed independently of one another."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[0] == 1:
            return F.linear(x, self.weight, self.bias)
        return torch.cat([F.linear(row, self.weight, self.bias) for row in x.split(1)])


def make_batch_invariant(module: nn.Module) -> nn.Module:
    """Turn every plain nn.Linear and nn.Conv2d of `module` into its batch-invariant class, in place
    (same parameters, hooks and state-dict keys). Subclasses (LoRA wrappers, quantised layers) are
    left alone: their forward is their own."""
    for m in module.modules():
        if type(m) is nn.Linear:
            m.__class__ = BatchInvariantLinear
        elif type(m) is nn.Conv2d:
            m.__class__ = BatchInvariantConv2d
    return module
