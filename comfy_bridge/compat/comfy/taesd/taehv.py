"""`comfy.taesd.taehv`: the Tiny AutoEncoder for video (madebyollin/taehv: HunyuanVideo, Wan 2.1 / 2.2, LTX-2),
a small in-process model packs load for previews. Parameter names and layout are ComfyUI's (encoder.N /
decoder.N), so its weight files load; frames are processed with per-block memory of the previous frame
(MemBlock), pooled in time on the way in (TPool) and grown in time on the way out (TGrow)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from comfy_bridge.compat.comfy import ops
from comfy_bridge.compat.comfy.taesd.taesd import Clamp, conv

__all__ = ["conv", "Clamp", "MemBlock", "TPool", "TGrow", "TAEHV", "apply_model_with_memblocks"]


class MemBlock(nn.Module):
    """A residual block over a frame and the previous frame's input to this block (`past`)."""

    def __init__(self, n_in: int, n_out: int, act_func: nn.Module):
        super().__init__()
        self.conv = nn.Sequential(conv(n_in * 2, n_out), act_func, conv(n_out, n_out), act_func, conv(n_out, n_out))
        self.skip = ops.disable_weight_init.Conv2d(n_in, n_out, 1, bias=False) if n_in != n_out else nn.Identity()
        self.act = act_func

    def forward(self, x: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(torch.cat([x, past], 1)) + self.skip(x))


class TPool(nn.Module):
    """`stride` consecutive frames ([B * T, C, H, W], frames of one clip adjacent) mixed into one by a 1x1 conv."""

    def __init__(self, n_f: int, stride: int):
        super().__init__()
        self.stride = stride
        self.conv = ops.disable_weight_init.Conv2d(n_f * stride, n_f, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, c, h, w = x.shape
        return self.conv(x.reshape(-1, self.stride * c, h, w))


class TGrow(nn.Module):
    """Each frame made into `stride` consecutive frames by a 1x1 conv."""

    def __init__(self, n_f: int, stride: int):
        super().__init__()
        self.stride = stride
        self.conv = ops.disable_weight_init.Conv2d(n_f, n_f * stride, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, c, h, w = x.shape
        return self.conv(x).reshape(-1, c, h, w)


def _parallel(model: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """All frames at once, block by block: a MemBlock's past is its input shifted one frame later in time."""
    b = x.shape[0]
    x = x.flatten(0, 1)
    for block in model:
        if isinstance(block, MemBlock):
            frames = x.unflatten(0, (b, -1))
            past = torch.cat([torch.zeros_like(frames[:, :1]), frames[:, :-1]], 1)
            x = block(x, past.flatten(0, 1))
        else:
            x = block(x)
    return x.unflatten(0, (b, -1))


def _sequential(model: nn.Sequential, x: torch.Tensor, show_progress_bar: bool) -> torch.Tensor:
    """Frame by frame, each carried through the blocks as far as it goes (a TPool waits for `stride` frames,
    a TGrow sends on `stride` frames in order): memory holds one frame per block, not the clip."""
    memory: list[Any] = [None] * len(model)
    waiting: list[list[torch.Tensor]] = [[] for _ in model]
    out: list[torch.Tensor] = []

    def carry(frame: torch.Tensor, start: int) -> None:
        for i in range(start, len(model)):
            block = model[i]
            if isinstance(block, MemBlock):
                past = torch.zeros_like(frame) if memory[i] is None else memory[i]
                memory[i] = frame.detach().clone()
                frame = block(frame, past)
            elif isinstance(block, TPool):
                waiting[i].append(frame)
                if len(waiting[i]) < block.stride:
                    return
                frame = block(torch.stack(waiting[i], 1).flatten(0, 1))
                waiting[i] = []
            elif isinstance(block, TGrow):
                grown = block(frame).unflatten(0, (frame.shape[0], block.stride))
                for k in range(block.stride):
                    carry(grown[:, k], i + 1)
                return
            else:
                frame = block(frame)
        out.append(frame)

    from comfy_bridge.compat.comfy.utils import ProgressBar

    bar = ProgressBar(x.shape[1]) if show_progress_bar else None
    for t in range(x.shape[1]):
        carry(x[:, t], 0)
        if bar is not None:
            bar.update(1)
    return torch.stack(out, 1)


def apply_model_with_memblocks(
    model: nn.Sequential, x: torch.Tensor, parallel: bool, show_progress_bar: bool
) -> torch.Tensor:
    """Run a TAEHV encoder or decoder on frames [B, T, C, H, W] -> [B, T', C', H', W']; parallel and
    sequential give the same frames (parallel is faster, sequential holds one frame per block)."""
    return _parallel(model, x) if parallel else _sequential(model, x, show_progress_bar)


class TAEHV(nn.Module):
    """The video tiny autoencoder; `latent_channels` picks the variant as ComfyUI does (16: HunyuanVideo /
    Wan 2.1, 48: Wan 2.2 and 32: HunyuanVideo 1.5 with 2x2 pixel patches, 128: LTX-2 with 4x4 patches and
    time scaled at every level). encode takes [B, 3, T, H, W] in [0, 1]-ish pixel space, decode latents
    [B, C, T, h, w] (or [B, T, C, h, w], or [T, C, h, w])."""

    def __init__(
        self,
        latent_channels: int,
        parallel: bool = False,
        encoder_time_downscale: tuple = (True, True, False),
        decoder_time_upscale: tuple = (False, True, True),
        decoder_space_upscale: tuple = (True, True, True),
        latent_format: Any = None,
        show_progress_bar: bool = False,
    ):
        super().__init__()
        self.image_channels, self.latent_channels, self.parallel = 3, latent_channels, parallel
        self.latent_format = latent_format
        identity = lambda t: t
        self.process_in = latent_format().process_in if latent_format is not None else identity
        self.process_out = latent_format().process_out if latent_format is not None else identity
        self.patch_size = {48: 2, 32: 2, 128: 4}.get(latent_channels, 1)
        if latent_channels == 128:
            encoder_time_downscale = decoder_time_upscale = (True, True, True)
        act = nn.LeakyReLU(0.2, inplace=True) if latent_channels == 32 else nn.ReLU(inplace=True)
        pixels = self.image_channels * self.patch_size**2
        enc: list[nn.Module] = [conv(pixels, 64), act]
        for pool in encoder_time_downscale:
            enc += [
                TPool(64, 2 if pool else 1),
                conv(64, 64, stride=2, bias=False),
                *(MemBlock(64, 64, act) for _ in range(3)),
            ]
        self.encoder = nn.Sequential(*enc, conv(64, latent_channels))
        widths = [256, 128, 64, 64]
        dec: list[nn.Module] = [Clamp(), conv(latent_channels, widths[0]), act]
        for level, (grow, up) in enumerate(zip(decoder_time_upscale, decoder_space_upscale)):
            n = widths[level]
            dec += [
                *(MemBlock(n, n, act) for _ in range(3)),
                nn.Upsample(scale_factor=2 if up else 1),
                TGrow(n, 2 if grow else 1),
                conv(n, widths[level + 1], bias=False),
            ]
        self.decoder = nn.Sequential(*dec, act, conv(widths[3], pixels))
        self.t_downscale = 2 ** sum(isinstance(m, TPool) and m.stride == 2 for m in self.encoder)
        self.t_upscale = 2 ** sum(isinstance(m, TGrow) and m.stride == 2 for m in self.decoder)
        self.frames_to_trim = self.t_upscale - 1
        self.show_progress_bar = show_progress_bar

    def encode(self, x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        x = x.movedim(2, 1)  # [B, C, T, H, W] -> [B, T, C, H, W]
        if self.patch_size > 1:
            x = F.pixel_unshuffle(x.flatten(0, 1), self.patch_size).unflatten(0, x.shape[:2])
        short = -x.shape[1] % self.t_downscale
        if short:  # the last frame repeated up to a whole number of pooled frames
            x = torch.cat([x, x[:, -1:].repeat_interleave(short, dim=1)], 1)
        x = apply_model_with_memblocks(self.encoder, x, self.parallel, self.show_progress_bar)
        return self.process_out(x.movedim(2, 1))

    def decode(self, x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        if x.ndim == 4:
            x = x.unsqueeze(0)
        if x.shape[1] != self.latent_channels:
            x = x.movedim(1, 2)  # [B, T, C, H, W] -> [B, C, T, H, W]
        x = apply_model_with_memblocks(
            self.decoder, self.process_in(x).movedim(2, 1), self.parallel, self.show_progress_bar
        )
        if self.patch_size > 1:
            x = F.pixel_shuffle(x, self.patch_size)
        return x[:, self.frames_to_trim :].movedim(2, 1)
