"""RIFE 4.2x (Practical-RIFE's IFNet, five blocks: 4.25 / 4.26 and their lite / heavy variants) as ComfyUI's
FrameInterpolationModelLoader builds it (comfy_extras/frame_interpolation_models/ifnet.py, newest ComfyUI): written
from its structure; parameter names are ComfyUI's (`encode.cnnN`, `blocks.N.conv0 / convblock / lastconv`), which
the published checkpoints reach after their `module.` / `flownet.` prefixes are dropped and `blockN.` becomes
`blocks.N.` (normalize_keys).

Each block sees both frames (warped by the flow so far), their 4x-upsampled head features warped the same way, the
timestep plane and the previous block's mask and 8 feature channels, at 1/16 .. 1/1 of the (64-aligned) frame, and
adds a residual to the two-way flow; the middle frame blends the two warped frames by the sigmoid of the last mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SCALES = (16, 8, 4, 2, 1)  # each block's downscale of its input
ALIGN = 64  # frames are reflect-padded at the right and bottom to multiples of this
BLOCK_OUT = 13  # 4 flow + 1 mask + 8 feature channels


def _leaky(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, 0.2)


class RifeFeatureHead(nn.Module):
    """The per-frame feature head: three 3x3 convolutions at half size, a transposed convolution back up."""

    def __init__(self, out_ch: int) -> None:
        super().__init__()
        self.cnn0 = nn.Conv2d(3, 16, 3, 2, 1)
        self.cnn1 = nn.Conv2d(16, 16, 3, 1, 1)
        self.cnn2 = nn.Conv2d(16, 16, 3, 1, 1)
        self.cnn3 = nn.ConvTranspose2d(16, out_ch, 4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _leaky(self.cnn2(_leaky(self.cnn1(_leaky(self.cnn0(x))))))
        return self.cnn3(x)


class ResConv(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 1, 1)
        self.beta = nn.Parameter(torch.ones(1, c, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _leaky(torch.addcmul(x, self.conv(x), self.beta))


class IFBlock(nn.Module):
    def __init__(self, in_planes: int, c: int) -> None:
        super().__init__()
        # nested Sequentials only to keep the checkpoint's names (conv0.0.0, conv0.1.0, lastconv.0)
        self.conv0 = nn.Sequential(
            nn.Sequential(nn.Conv2d(in_planes, c // 2, 3, 2, 1), nn.LeakyReLU(0.2)),
            nn.Sequential(nn.Conv2d(c // 2, c, 3, 2, 1), nn.LeakyReLU(0.2)),
        )
        self.convblock = nn.Sequential(*(ResConv(c) for _ in range(8)))
        self.lastconv = nn.Sequential(nn.ConvTranspose2d(c, 4 * BLOCK_OUT, 4, 2, 1), nn.PixelShuffle(2))

    def forward(self, x: torch.Tensor, flow: torch.Tensor | None, scale: int):
        x = F.interpolate(x, scale_factor=1.0 / scale, mode="bilinear")
        if flow is not None:
            x = torch.cat((x, F.interpolate(flow, scale_factor=1.0 / scale, mode="bilinear") / scale), 1)
        out = F.interpolate(self.lastconv(self.convblock(self.conv0(x))), scale_factor=scale, mode="bilinear")
        return out[:, :4] * scale, out[:, 4:5], out[:, 5:]


def warp(img: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """`img` sampled at each pixel moved by `flow` (pixels; corners-aligned grid, border padding), in float32."""
    _, _, h, w = img.shape
    ys = torch.linspace(-1.0, 1.0, h, dtype=torch.float32, device=img.device)
    xs = torch.linspace(-1.0, 1.0, w, dtype=torch.float32, device=img.device)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    base = torch.stack((gx, gy))[None]
    norm = torch.cat((flow[:, 0:1] / ((w - 1.0) / 2.0), flow[:, 1:2] / ((h - 1.0) / 2.0)), 1).float()
    grid = (base.expand(img.shape[0], -1, -1, -1) + norm).permute(0, 2, 3, 1)
    out = F.grid_sample(img.float(), grid, mode="bilinear", padding_mode="border", align_corners=True)
    return out.to(img.dtype)


class Rife(nn.Module):
    pad_align = ALIGN

    def __init__(self, head_ch: int = 4, channels: tuple[int, ...] = (192, 128, 96, 64, 32)) -> None:
        super().__init__()
        self.encode = RifeFeatureHead(head_ch)
        first, later = 7 + 2 * head_ch, 20 + 2 * head_ch
        self.blocks = nn.ModuleList(IFBlock(first if i == 0 else later, c) for i, c in enumerate(channels))

    def features(self, img: torch.Tensor):
        return self.encode(img)

    def middle(self, img0, img1, f0, f1, timesteps: list[float]) -> torch.Tensor:
        """The frames at `timesteps` between img0 and img1 ([1,3,H,W] each), as one batch [len(timesteps),3,H,W]."""
        b, (_, _, h, w) = len(timesteps), img0.shape
        img0, img1 = img0.expand(b, -1, -1, -1), img1.expand(b, -1, -1, -1)
        f0, f1 = f0.expand(b, -1, -1, -1), f1.expand(b, -1, -1, -1)
        t = torch.tensor(timesteps, dtype=img0.dtype, device=img0.device).reshape(b, 1, 1, 1).expand(-1, 1, h, w)
        flow = mask = feat = None
        w0, w1 = img0, img1
        for block, scale in zip(self.blocks, SCALES):
            if flow is None:
                flow, mask, feat = block(torch.cat((img0, img1, f0, f1, t), 1), None, scale)
            else:
                x = torch.cat((w0, w1, warp(f0, flow[:, :2]), warp(f1, flow[:, 2:4]), t, mask, feat), 1)
                delta, mask, feat = block(x, flow, scale)
                flow = flow + delta
            w0, w1 = warp(img0, flow[:, :2]), warp(img1, flow[:, 2:4])
        return torch.lerp(w1, w0, torch.sigmoid(mask))


def normalize_keys(sd: dict) -> dict:
    """A RIFE checkpoint's names as ComfyUI's IFNet has them: without the training wrappers' `module.` and
    `flownet.` prefixes, `blockN.` as `blocks.N.`, the distillation `teacher.` / `caltime.` parts dropped."""
    out = {}
    for key, value in sd.items():
        for prefix in ("module.", "flownet."):
            key = key[len(prefix) :] if key.startswith(prefix) else key
        if key.startswith("block") and key[5:6].isdigit() and key[6:7] == ".":
            key = f"blocks.{key[5]}.{key[7:]}"
        if not key.startswith(("teacher.", "caltime.")):
            out[key] = value
    return out


def rife_config(sd: dict) -> tuple[int, tuple[int, ...]]:
    """(head channels, each block's width) of a normalized RIFE state dict (tensors, or their shapes as a file
    header gives them); ValueError when it is none."""

    def shape(key: str) -> tuple[int, ...]:
        return tuple(getattr(sd[key], "shape", sd[key]))

    if "encode.cnn3.weight" not in sd:
        raise ValueError("no RIFE head (encode.cnn3.weight)")
    channels = tuple(shape(k)[0] for i in range(5) if (k := f"blocks.{i}.conv0.1.0.weight") in sd)
    if len(channels) != 5:
        raise ValueError(f"a RIFE 4.2x model has 5 blocks, this one {len(channels)}")
    return shape("encode.cnn3.weight")[1], channels


def build_rife(sd: dict[str, torch.Tensor]) -> Rife:
    sd = normalize_keys(sd)
    with torch.device("meta"):  # no initial draws: every parameter comes from the file
        model = Rife(*rife_config(sd))
    model.load_state_dict({k: v.float() for k, v in sd.items()}, assign=True)
    return model.eval()
