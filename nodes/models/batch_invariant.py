"""Batch-invariant linear layers, so a request's denoising step gives the same bits whether the
executor runs it alone or merged with other requests' steps (cluster.batching).

On CPU, a GEMM with few rows picks its kernel (and so its summation order) by the row count: the
time-embedding and modulation projections, whose input is [batch, features], round differently at
batch 2 than at batch 4. Every other layer of the UNet and DiT families was checked row for row and
is already invariant (convolutions, norms and token-wise projections split their work by sample or
token the same way at any batch). So only 2-D inputs are special-cased: each row is multiplied on
its own, the same GEMV at any batch size. Those projections are a few hundred microseconds of a
step at most; the token-wise projections keep their single GEMM.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BatchInvariantLinear(nn.Linear):
    """nn.Linear whose rows of a 2-D input are computed independently of one another."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[0] == 1:
            return F.linear(x, self.weight, self.bias)
        return torch.cat([F.linear(row, self.weight, self.bias) for row in x.split(1)])


def make_batch_invariant(module: nn.Module) -> nn.Module:
    """Turn every plain nn.Linear of `module` into a BatchInvariantLinear, in place (same parameters,
    hooks and state-dict keys). Subclasses of nn.Linear (LoRA wrappers, quantised layers) are left
    alone: their forward is their own."""
    for m in module.modules():
        if type(m) is nn.Linear:
            m.__class__ = BatchInvariantLinear
    return module
