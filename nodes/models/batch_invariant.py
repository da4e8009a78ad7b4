"""Batch-invariant layers, so a request's denoising step gives the same bits whether the executor
runs it alone or merged with other requests' steps (cluster.scheduling.batching).

On CPU the differences come from torch choosing a kernel by the problem's size, measured layer by layer on
the UNet and Flux families (scripts/measure_batch_invariance.py):

- convolutions: for one sample torch runs a small input (at most 20480 values, kernel up to 3x3), and a 1x1
  one on one thread, through its native im2col + GEMM, and a batch of 2 or more (or 16 for 1x1) through
  oneDNN: the two round differently. Each of the two kernels alone gave every sample the same bits at
  every batch size (1 to 16, 1 and 2 threads, every conv of the tiny demo UNets and 320-channel SD1-sized
  ones). So a float32 CPU convolution is pinned to the kernel torch picks for one sample, at any batch:
  invariance at no cost, the unbatched bits unchanged, and batches faster than the per-sample loop this
  replaced. Elsewhere (CUDA, where cuDNN also picks algorithms by size; no oneDNN) a convolution runs one
  sample at a time.
- [batch, features] projections (time embedding, modulation): the GEMM differs from batch 2 on, so a 2-D
  linear input is multiplied row by row; these layers are a small share of a step.
- norms, attention and the token-wise projections did not differ.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# torch's own bound (ConvParams::use_mkldnn): a single sample of at most this many values, with a kernel up to
# 3x3, runs through the native im2col + GEMM, which is faster than oneDNN there
_NATIVE_MAX_VALUES = 20480


def _backend(conv: nn.Conv2d, x: torch.Tensor) -> str:
    """The CPU kernel a float32 convolution is pinned to, chosen as torch chooses for one sample of `x`, so
    that it is the same at every batch size: "native", "onednn", or "" (not pinned: one sample at a time)."""
    if not (
        x.device.type == "cpu"
        and x.dtype == conv.weight.dtype == torch.float32
        and torch.backends.mkldnn.is_available()
        and conv.padding_mode == "zeros"
        and not isinstance(conv.padding, str)
    ):
        return ""
    if conv.groups != 1 or conv.dilation != (1, 1):
        return "onednn"
    kh, kw = conv.kernel_size
    onednn_allowed = conv.stride != (1, 1) or (kh, kw) != (1, 1) or torch.get_num_threads() > 1
    onednn_faster = (kh > 3 and kw > 3) or x[0].numel() > _NATIVE_MAX_VALUES
    return "onednn" if onednn_allowed and onednn_faster else "native"


class BatchInvariantConv2d(nn.Conv2d):
    """nn.Conv2d whose samples round alike at any batch size: on CPU through the kernel torch picks for one
    sample, elsewhere one sample at a time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        backend = _backend(self, x) if x.dim() == 4 else ""
        if backend == "native":
            return torch.ops.aten.thnn_conv2d(x, self.weight, self.kernel_size, self.bias, self.stride, self.padding)
        if backend == "onednn":
            return torch.ops.aten.mkldnn_convolution(
                x.contiguous(), self.weight, self.bias, self.padding, self.stride, self.dilation, self.groups
            )
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
