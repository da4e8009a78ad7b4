"""ESRGAN-family upscale models (RRDBNet: ESRGAN, BSRGAN/RealSR, Real-ESRGAN with pixel-unshuffle), as
ComfyUI's UpscaleModelLoader loads them through spandrel: the same state-dict layouts, the same size
inference from tensor shapes, and the same forward pass (pad to the model's size requirement, run, clamp
to 0..1, crop), so an upscale gives ComfyUI's pixels.

Written here because spandrel needs torchvision, which this project does not install. Files in the newer
key layouts (`conv_first` / `body.N.rdbM` / `conv_up1` ...) are renamed to the original ESRGAN layout
(`model.0` / `model.1.sub.N.RDBM` ...), which the module below uses, exactly as spandrel renames them.

The tiled upscale of ImageUpscaleWithModel is `tiled_scale`: it blends tiles with ComfyUI's linear
feathering in ComfyUI's order of float operations, so tiled outputs match too.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .errors import ModelLoadError

GROWTH = 32  # spandrel builds every RRDB with 32 growth channels, whatever the file says
LEAK = 0.2


def _conv(cin: int, cout: int, act: bool) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, 3, padding=1)]
    if act:
        layers.append(nn.LeakyReLU(LEAK, inplace=True))
    return nn.Sequential(*layers)


class _DenseBlock(nn.Module):
    """Five densely connected convs (conv1.0 ... conv5.0), residual scaled by 0.2; ESRGAN+ adds conv1x1."""

    def __init__(self, nf: int, plus: bool) -> None:
        super().__init__()
        self.conv1x1 = nn.Conv2d(nf, GROWTH, 1, bias=False) if plus else None
        for i in range(4):
            setattr(self, f"conv{i + 1}", _conv(nf + i * GROWTH, GROWTH, True))
        self.conv5 = _conv(nf + 4 * GROWTH, nf, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.conv1(x)
        x2 = self.conv2(torch.cat((x, x1), 1))
        if self.conv1x1 is not None:
            x2 = x2 + self.conv1x1(x)
        x3 = self.conv3(torch.cat((x, x1, x2), 1))
        x4 = self.conv4(torch.cat((x, x1, x2, x3), 1))
        if self.conv1x1 is not None:
            x4 = x4 + x2
        x5 = self.conv5(torch.cat((x, x1, x2, x3, x4), 1))
        return x5 * 0.2 + x


class _RRDB(nn.Module):
    def __init__(self, nf: int, plus: bool) -> None:
        super().__init__()
        self.RDB1, self.RDB2, self.RDB3 = (_DenseBlock(nf, plus) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.RDB3(self.RDB2(self.RDB1(x))) * 0.2 + x


class _Shortcut(nn.Module):
    def __init__(self, sub: nn.Sequential) -> None:
        super().__init__()
        self.sub = sub

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.sub(x)


@dataclass(frozen=True)
class ESRGANConfig:
    in_nc: int
    out_nc: int
    nf: int
    blocks: int
    scale: int  # of the network itself (before pixel-unshuffle)
    plus: bool
    shuffle: int | None  # Real-ESRGAN x2/x1: the input is pixel-unshuffled by this factor first

    @property
    def image_scale(self) -> int:
        """How much larger the output image is than the input image."""
        return self.scale // self.shuffle if self.shuffle else self.scale

    @property
    def multiple_of(self) -> int:
        return 4 if self.shuffle else 1


class RRDBNet(nn.Module):
    """The original ESRGAN layout: model.0 conv, model.1 shortcut over the RRDB trunk, nearest-x2 up-convs,
    then two convs."""

    def __init__(self, cfg: ESRGANConfig) -> None:
        super().__init__()
        self.cfg = cfg
        trunk = [_RRDB(cfg.nf, cfg.plus) for _ in range(cfg.blocks)] + [nn.Conv2d(cfg.nf, cfg.nf, 3, padding=1)]
        layers: list[nn.Module] = [nn.Conv2d(cfg.in_nc, cfg.nf, 3, padding=1), _Shortcut(nn.Sequential(*trunk))]
        for _ in range(int(math.log2(cfg.scale))):
            layers += [
                nn.Upsample(scale_factor=2, mode="nearest"),
                nn.Conv2d(cfg.nf, cfg.nf, 3, padding=1),
                nn.LeakyReLU(LEAK, inplace=True),
            ]
        layers += [
            nn.Conv2d(cfg.nf, cfg.nf, 3, padding=1),
            nn.LeakyReLU(LEAK, inplace=True),
            nn.Conv2d(cfg.nf, cfg.out_nc, 3, padding=1),
        ]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.cfg.shuffle:
            return self.model(x)
        h, w = x.shape[-2:]
        f = self.cfg.shuffle
        x = F.pad(x, (0, (f - w % f) % f, 0, (f - h % f) % f), mode="reflect")
        x = self.model(F.pixel_unshuffle(x, f))
        return x[:, :, : h * self.cfg.image_scale, : w * self.cfg.image_scale]


@dataclass
class UpscaleModel:
    """A loaded upscale model: ComfyUI's ImageModelDescriptor, called on [1,C,H,W] images in 0..1."""

    module: RRDBNet

    @property
    def scale(self) -> int:
        return self.module.cfg.image_scale

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        h, w = image.shape[-2:]
        padded = _pad_to_requirement(image, self.module.cfg.multiple_of)
        out = self.module(padded).clamp_(0, 1)
        if padded is not image:
            out = out[..., : h * self.scale, : w * self.scale]
        return out


def _pad_to_requirement(t: torch.Tensor, multiple: int, minimum: int = 2) -> torch.Tensor:
    """spandrel's padding: reflect on the right and bottom as far as it can, replicate for the rest."""
    h, w = t.shape[-2:]

    def needed(size: int) -> int:
        target = max(size, minimum)
        return target + (multiple - target % multiple) % multiple - size

    pad_w, pad_h = needed(w), needed(h)
    if not pad_w and not pad_h:
        return t
    rw, rh = min(pad_w, w - 1), min(pad_h, h - 1)
    t = F.pad(t, (0, rw, 0, rh), "reflect")
    return F.pad(t, (0, pad_w - rw, 0, pad_h - rh), "replicate")


# ---- state-dict layouts ---------------------------------------------------------------------------------

_NEW_TRUNK = (
    re.compile(r"^body\.(\d+)\.rdb(\d)\.conv(\d+)\.(weight|bias)$"),
    re.compile(r"^RRDB_trunk\.(\d+)\.RDB(\d)\.conv(\d+)\.(weight|bias)$"),
)


def is_esrgan(keys) -> bool:
    keys = set(keys)
    return (
        {"model.0.weight", "model.1.sub.0.RDB1.conv1.0.weight"} <= keys
        or {"model.0.weight", "model.1.sub.0.RDB1.conv1x1.weight"} <= keys
        or {"conv_first.weight", "body.0.rdb1.conv1.weight", "conv_body.weight", "conv_last.weight"} <= keys
        or {"conv_first.weight", "RRDB_trunk.0.RDB1.conv1.weight", "trunk_conv.weight", "conv_last.weight"} <= keys
    )


def to_old_layout(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a Real-ESRGAN / BSRGAN state dict to the original ESRGAN keys (old-layout files pass through)."""
    if "conv_first.weight" not in sd:
        return sd
    out: dict[str, torch.Tensor] = {}
    blocks = 0
    for k, v in sd.items():
        for pattern in _NEW_TRUNK:
            m = pattern.match(k)
            if m:
                n, rdb, conv, kind = m.groups()
                out[f"model.1.sub.{n}.RDB{rdb}.conv{conv}.0.{kind}"] = v
                blocks = max(blocks, int(n) + 1)
    top = 0
    for k, v in sd.items():
        m = re.match(r"^(upconv|conv_up)(\d)\.(weight|bias)$", k)
        if m:
            out[f"model.{int(m.group(2)) * 3}.{m.group(3)}"] = v
            top = max(top, int(m.group(2)) * 3)
    renames = {
        "conv_first": "model.0",
        "trunk_conv": f"model.1.sub.{blocks}",
        "conv_body": f"model.1.sub.{blocks}",
        "HRconv": f"model.{top + 2}",
        "conv_hr": f"model.{top + 2}",
        "conv_last": f"model.{top + 4}",
    }
    for old, new in renames.items():
        for kind in ("weight", "bias"):
            if f"{old}.{kind}" in sd:
                out[f"{new}.{kind}"] = sd[f"{old}.{kind}"]
    return out


def _seq_len(sd: dict[str, torch.Tensor], prefix: str) -> int:
    """1 + the largest index N of keys `prefix.N.*` (spandrel's get_seq_len)."""
    found = [int(m.group(1)) for k in sd if (m := re.match(re.escape(prefix) + r"\.(\d+)\.", k))]
    return max(found) + 1 if found else 0


def config_of(sd: dict[str, torch.Tensor], path: str | None = None) -> ESRGANConfig:
    """The network sizes of an old-layout state dict, inferred as spandrel infers them."""
    n = _seq_len(sd, "model")
    if "model.0.weight" not in sd or n < 5:
        raise ModelLoadError(path, "not an ESRGAN (RRDBNet) upscale model")
    in_nc, out_nc = sd["model.0.weight"].shape[1], sd[f"model.{n - 1}.weight"].shape[0]
    scale = 2 ** ((n - 5) // 3)
    shuffle = None
    if in_nc in (out_nc * 4, out_nc * 16):
        shuffle = int(math.sqrt(in_nc / out_nc))
    return ESRGANConfig(
        in_nc=in_nc,
        out_nc=out_nc,
        nf=sd["model.0.weight"].shape[0],
        blocks=_seq_len(sd, "model.1.sub") - 1,
        scale=scale,
        plus=any(".conv1x1." in k for k in sd),
        shuffle=shuffle,
    )


def load_upscale_model(sd: dict[str, torch.Tensor], path: str | None = None) -> UpscaleModel:
    """An upscale model from a state dict in any ESRGAN layout; other architectures are refused by name."""
    from .safetensors_io import build_module

    if not is_esrgan(sd):
        raise ModelLoadError(
            path,
            "is not an upscale model Comfy Cluster can run (supported: ESRGAN / Real-ESRGAN / BSRGAN RRDBNet models)",
        )
    old = to_old_layout(sd)
    cfg = config_of(old, path)
    return UpscaleModel(build_module(lambda: RRDBNet(cfg), old, path, "upscale model"))


# ---- tiling ---------------------------------------------------------------------------------------------


def tiled_scale(samples: torch.Tensor, fn, tile: int, overlap: int, scale: int, out_channels: int) -> torch.Tensor:
    """Run `fn` on overlapping tile x tile windows of [B,C,H,W] and blend the scaled results: each tile's
    weight rises linearly over `overlap * scale` pixels from every edge, and the sum is divided by the sum
    of the weights. One window per image when it fits in a tile."""
    b, _, h, w = samples.shape
    output = torch.empty(b, out_channels, round(h * scale), round(w * scale), device=samples.device)
    for i in range(b):
        s = samples[i : i + 1]
        if h <= tile and w <= tile:
            output[i : i + 1] = fn(s)
            continue
        out = torch.zeros(1, out_channels, round(h * scale), round(w * scale), device=samples.device)
        out_div = torch.zeros_like(out)
        starts = [range(0, size - overlap, tile - overlap) if size > tile else [0] for size in (h, w)]
        feather = round(overlap * scale)
        for y, x in itertools.product(*starts):
            y, x = max(0, min(h - overlap, y)), max(0, min(w - overlap, x))
            piece = fn(s[:, :, y : y + min(tile, h - y), x : x + min(tile, w - x)])
            mask = torch.ones_like(piece)
            for dim in (2, 3):
                if feather >= mask.shape[dim]:
                    continue
                for t in range(feather):
                    a = (t + 1) / feather
                    mask.narrow(dim, t, 1).mul_(a)
                    mask.narrow(dim, mask.shape[dim] - 1 - t, 1).mul_(a)
            oy, ox = round(y * scale), round(x * scale)
            out[:, :, oy : oy + mask.shape[2], ox : ox + mask.shape[3]].add_(piece * mask)
            out_div[:, :, oy : oy + mask.shape[2], ox : ox + mask.shape[3]].add_(mask)
        output[i : i + 1] = out / out_div
    return output
