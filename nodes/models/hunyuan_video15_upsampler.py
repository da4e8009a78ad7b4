"""HunyuanVideo 1.5's 1080p latent upsampler (latent_upscale_models/hunyuanvideo15_latent_upsampler_1080p.safetensors),
as ComfyUI 0.10.0's LatentUpscaleModelLoader reads it (told by `up.0.block.0.conv1.conv.weight`): a same-size
refiner of a latent already resized to the target (HunyuanVideo15LatentUpscaleWithModel resizes first), its widths
read from the file: a causal input convolution plus the latent repeated to its width, stages of RMS-normed causal
resnets (a 1x1 shortcut where the width changes), an RMS norm, SiLU and a causal output convolution. Causal here
is ComfyUI's VideoConv3d: replicate padding, two frames before and none after. The 720p SR model (told by
`blocks.0.block.0.conv.weight`) is refused by name: not supported yet.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import build_module

MARKER_1080P = "up.0.block.0.conv1.conv.weight"
MARKER_720P = "blocks.0.block.0.conv.weight"


def is_hunyuan_upsampler(keys) -> bool:
    return MARKER_1080P in keys or MARKER_720P in keys


class UpsamplerCausalConv(torch.nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int):
        super().__init__()
        self.kernel = kernel
        self.conv = torch.nn.Conv3d(cin, cout, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel > 1:
            x = F.pad(x, (1, 1, 1, 1, 2, 0), mode="replicate")
        return self.conv(x)


class UpsamplerRMSNorm(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.gamma = torch.nn.Parameter(torch.ones(dim, 1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=1) * self.gamma.shape[0] ** 0.5 * self.gamma


class UpsamplerResBlock(torch.nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.norm1, self.conv1 = UpsamplerRMSNorm(cin), UpsamplerCausalConv(cin, cout, 3)
        self.norm2, self.conv2 = UpsamplerRMSNorm(cout), UpsamplerCausalConv(cout, cout, 3)
        self.nin_shortcut = UpsamplerCausalConv(cin, cout, 1) if cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return (x if self.nin_shortcut is None else self.nin_shortcut(x)) + h


class UpsamplerStage(torch.nn.Module):
    def __init__(self, blocks: list[UpsamplerResBlock]):
        super().__init__()
        self.block = torch.nn.ModuleList(blocks)


class LatentUpsampler1080p(torch.nn.Module):
    def __init__(self, z_channels: int, out_channels: int, widths: tuple[int, ...], resnets: int):
        super().__init__()
        self.z_channels, self.widths = z_channels, widths
        self.conv_in = UpsamplerCausalConv(z_channels, widths[0], 3)
        stages, ch = [], widths[0]
        for width in widths:
            stages.append(UpsamplerStage([UpsamplerResBlock(ch if j == 0 else width, width) for j in range(resnets)]))
            ch = width
        self.up = torch.nn.ModuleList(stages)
        self.norm_out = UpsamplerRMSNorm(ch)
        self.conv_out = UpsamplerCausalConv(ch, out_channels, 3)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.conv_in(z) + z.repeat_interleave(self.widths[0] // self.z_channels, dim=1)
        for stage in self.up:
            for block in stage.block:
                x = block(x)
        return self.conv_out(F.silu(self.norm_out(x)))


def load_latent_upsampler(sd: Mapping[str, torch.Tensor], path: str | None = None) -> LatentUpsampler1080p:
    """The 1080p upsampler of a file, computed in float32."""
    if MARKER_720P in sd:
        raise ModelLoadError(path, "HunyuanVideo 1.5's 720p SR latent model is not supported yet (the 1080p one is)")
    if MARKER_1080P not in sd:
        raise ModelLoadError(path, f"not a HunyuanVideo 1.5 latent upsampler (no {MARKER_1080P})")
    stages = sorted(
        {int(k.split(".")[1]) for k in sd if k.startswith("up.") and k.endswith(".block.0.conv1.conv.weight")}
    )
    widths = tuple(int(sd[f"up.{i}.block.0.conv1.conv.weight"].shape[0]) for i in stages)
    resnets = len({k.split(".")[3] for k in sd if k.startswith("up.0.block.")})
    z, out = int(sd["conv_in.conv.weight"].shape[1]), int(sd["conv_out.conv.weight"].shape[0])
    # ComfyUI's loader renames nin_shortcut to nin_shortcut.conv (its shortcut is a VideoConv3d); accept both
    state = {
        (k.replace("nin_shortcut.", "nin_shortcut.conv.", 1) if ".nin_shortcut.conv." not in k else k): v
        for k, v in sd.items()
    }
    return build_module(
        lambda: LatentUpsampler1080p(z, out, widths, resnets), state, path, "HunyuanVideo 1.5 latent upsampler"
    )


__all__ = ["is_hunyuan_upsampler", "load_latent_upsampler"]
