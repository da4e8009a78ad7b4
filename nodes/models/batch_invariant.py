"""Batch-invariant layers, so a request's denoising step gives the same bits whether the executor
runs it alone or merged with other requests' steps (cluster.scheduling.batching).

On CPU the differences come from torch choosing a kernel by the problem's size, measured layer by layer on
the UNet and Flux families (scripts/measure_batch_invariance.py):

- convolutions: for one sample torch runs a small input (at most 20480 values, kernel up to 3x3), and a 1x1
  one on one thread, through its native im2col + GEMM, and a batch of 2 or more (or 16 for 1x1) through
  oneDNN: the two round differently. Each of the two kernels alone gave every sample the same bits at
  every batch size (1 to 16, 1 and 2 threads, every conv of the tiny demo UNets and 320-channel SD1-sized
  ones). So a float32 CPU convolution is pinned to one kernel per layer and sample shape, at any batch:
  invariance at no cost, and batches faster than the per-sample loop this replaced. The kernel is torch's
  choice for one sample, except where the output is small (at most 16x16 pixels, kernel up to 3x3): there
  oneDNN reorders the whole weight into its blocked layout on every call, which costs more than the
  convolution (an SD UNet's deep levels: 1280 channels at 8x8, one thread, 44 ms through oneDNN, 20 ms
  native), so those run natively, each sample's GEMM on one thread (ATen multiplies a lone sample on all
  threads, which rounds differently from the samples of a batch). Elsewhere (CUDA, where cuDNN also picks
  algorithms by size; no oneDNN) a convolution runs one sample at a time.
- projections of samples with few rows ([batch, features] time embeddings and modulations, PixelDiT's
  [batch, 1, features] ones, the tokens of a small image's deepest levels): the GEMM differs from batch 2 on,
  so such an input is multiplied a sample at a time (few_rows_bound).
- video patch embeddings (Conv3d): run a sample at a time.
- norms, attention and the token-wise projections (samples of more rows) did not differ.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

# CPU GEMMs of few rows run through kernels that round by the number of rows and by how the threads split them, so
# a sample of few rows ([batch, features] time embeddings and modulations, PixelDiT's [batch, 1, features] ones)
# rounds differently beside others. Measured with scripts/measure_batch_invariance.py's gemm_rows (widths 64 to
# 10240, 1 to 256 rows, batches 2 to 8, MKL through torch 2.13): on one thread samples of 1-3 rows differ and no
# count from 4 on does; on 2 threads 1-3, 5-7 and 9-11 differ, and none from 12 on. A probe of the same kind at
# width 320 (not in the script) found none from 12 to 4096 rows on 2 threads, up to 11 on 8 threads and up to 27 on
# 16. A sample of fewer rows than few_rows_bound() is multiplied alone. The bound is kept low on purpose: a small
# image's deepest UNet levels have few tokens and the largest weights, which a batch reads once.
ONE_THREAD_GEMM_ROWS = 4
THREADED_GEMM_ROWS = 12


def few_rows_bound() -> int:
    """Samples with fewer rows than this are multiplied one at a time: 4 on one thread, else the larger of 12
    and 4 per thread (16 threads: 64, above the 27 measured)."""
    threads = torch.get_num_threads()
    return ONE_THREAD_GEMM_ROWS if threads == 1 else max(THREADED_GEMM_ROWS, 4 * threads)


# torch's own bound (ConvParams::use_mkldnn): a single sample of at most this many values, with a kernel up to
# 3x3, runs through the native im2col + GEMM, which is faster than oneDNN there
_NATIVE_MAX_VALUES = 20480
# Outputs of at most this many pixels per sample (kernel up to 3x3) run natively whatever their channels: oneDNN's
# per-call weight reorder outweighs the convolution there. Measured on this AVX-512 Xeon, one sample, float32:
# 1280 -> 1280 channels at 4x4 41 ms oneDNN / 9 ms native, 8x8 44 / 20, 16x16 84 / 58, 2560 -> 1280 at 8x8
# 94 / 42, 640 -> 640 at 16x16 17 / 15; at 32x32 oneDNN is faster (640 channels 48 / 61).
_NATIVE_MAX_OUT_PIXELS = 256


def _out_pixels(conv: nn.Conv2d, x: torch.Tensor) -> int:
    (kh, kw), (sh, sw), (ph, pw) = conv.kernel_size, conv.stride, conv.padding
    return ((x.shape[-2] + 2 * ph - kh) // sh + 1) * ((x.shape[-1] + 2 * pw - kw) // sw + 1)


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
    small_output = kh <= 3 and kw <= 3 and _out_pixels(conv, x) <= _NATIVE_MAX_OUT_PIXELS
    return "onednn" if onednn_allowed and onednn_faster and not small_output else "native"


@contextlib.contextmanager
def single_thread(when: bool) -> Iterator[None]:
    """torch on one thread for the block, if `when` (this thread's count: OpenMP keeps one per thread)."""
    threads = torch.get_num_threads()
    if not when or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class BatchInvariantConv2d(nn.Conv2d):
    """nn.Conv2d whose samples round alike at any batch size: on CPU through the kernel torch picks for one
    sample, elsewhere one sample at a time."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        backend = _backend(self, x) if x.dim() == 4 else ""
        if backend == "native":
            # a batch's samples are multiplied one per thread; a lone one would be split over the threads
            with single_thread(x.shape[0] == 1):
                return torch.ops.aten.thnn_conv2d(
                    x, self.weight, self.kernel_size, self.bias, self.stride, self.padding
                )
        if backend == "onednn":
            return torch.ops.aten.mkldnn_convolution(
                x.contiguous(), self.weight, self.bias, self.padding, self.stride, self.dilation, self.groups
            )
        if x.dim() != 4 or x.shape[0] == 1:
            return self._conv_forward(x, self.weight, self.bias)
        return torch.cat([self._conv_forward(sample, self.weight, self.bias) for sample in x.split(1)])


class BatchInvariantLinear(nn.Linear):
    """nn.Linear whose samples (the first dimension) are computed independently of one another where their rows
    are few: a sample of fewer rows than few_rows_bound() is multiplied alone."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2 or x.shape[0] == 1 or x[0].numel() >= few_rows_bound() * x.shape[-1]:
            return F.linear(x, self.weight, self.bias)
        return torch.cat([F.linear(sample, self.weight, self.bias) for sample in x.split(1)])


class BatchInvariantConv3d(nn.Conv3d):
    """nn.Conv3d one sample at a time: video patch embeddings (Wan's, a strided 1x2x2 kernel) round by the batch
    around a sample on CPU, and are a small share of a step."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 5 or x.shape[0] == 1:
            return self._conv_forward(x, self.weight, self.bias)
        return torch.cat([self._conv_forward(sample, self.weight, self.bias) for sample in x.split(1)])


def make_batch_invariant(module: nn.Module) -> nn.Module:
    """Turn every plain nn.Linear, nn.Conv2d and nn.Conv3d of `module` into its batch-invariant class, in place
    (same parameters, hooks and state-dict keys). Subclasses (LoRA wrappers, quantised layers) are
    left alone: their forward is their own."""
    for m in module.modules():
        if type(m) is nn.Linear:
            m.__class__ = BatchInvariantLinear
        elif type(m) is nn.Conv2d:
            m.__class__ = BatchInvariantConv2d
        elif type(m) is nn.Conv3d:
            m.__class__ = BatchInvariantConv3d
    return module
