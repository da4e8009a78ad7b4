"""RAFT-large optical flow (Teed & Deng 2020) in torchvision's checkpoint layout (raft_large_C_T_SKHT_V2, the file
ComfyUI's OpticalFlowLoader reads): a feature encoder on both frames, a context encoder on the first, the all-pairs
correlation volume pooled into a 4-level pyramid, then 12 recurrent updates of the flow at 1/8 resolution, each
upsampled 8x by a learned convex combination of its 3x3 neighbourhood. The layer widths are RAFT-large's (the
loader builds exactly that network), read from the state dict where the keys give them."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

LEVELS, RADIUS, UPDATES = 4, 4, 12


def _conv(cin: int, cout: int, k, stride: int = 1, padding=None) -> nn.Conv2d:
    if padding is None:
        padding = (k - 1) // 2 if isinstance(k, int) else tuple((x - 1) // 2 for x in k)
    return nn.Conv2d(cin, cout, k, stride=stride, padding=padding)


class _ConvNorm(nn.Sequential):
    """conv, optional norm (torchvision's index 1), ReLU unless `act` is False: keys `.0.*` and `.1.*`."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, norm: str | None = None, act: bool = True):
        layers: list[nn.Module] = [_conv(cin, cout, k, stride)]
        if norm == "batch":
            layers.append(nn.BatchNorm2d(cout))
        elif norm == "instance":
            layers.append(nn.InstanceNorm2d(cout))
        if act:
            layers.append(nn.ReLU())
        super().__init__(*layers)


class _Residual(nn.Module):
    def __init__(self, cin: int, cout: int, norm: str, stride: int):
        super().__init__()
        self.convnormrelu1 = _ConvNorm(cin, cout, 3, stride, norm)
        self.convnormrelu2 = _ConvNorm(cout, cout, 3, 1, norm)
        self.downsample = nn.Identity() if stride == 1 else _ConvNorm(cin, cout, 1, stride, norm, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.downsample(x) + self.convnormrelu2(self.convnormrelu1(x)))


class _Encoder(nn.Module):
    """7x7 stride-2 stem, three pairs of residual blocks (strides 1, 2, 2), a 1x1 projection: 1/8 resolution."""

    def __init__(self, norm: str, widths=(64, 64, 96, 128, 256)):
        super().__init__()
        self.convnormrelu = _ConvNorm(3, widths[0], 7, 2, norm)
        for i, stride in enumerate((1, 2, 2), start=1):
            cin, cout = widths[i - 1], widths[i]
            setattr(
                self, f"layer{i}", nn.Sequential(_Residual(cin, cout, norm, stride), _Residual(cout, cout, norm, 1))
            )
        self.conv = nn.Conv2d(widths[3], widths[4], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.layer3(self.layer2(self.layer1(self.convnormrelu(x)))))


class _GRU(nn.Module):
    def __init__(self, hidden: int, cin: int, k: tuple[int, int]):
        super().__init__()
        self.convz = _conv(hidden + cin, hidden, k)
        self.convr = _conv(hidden + cin, hidden, k)
        self.convq = _conv(hidden + cin, hidden, k)

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        hx = torch.cat([h, x], dim=1)
        z, r = torch.sigmoid(self.convz(hx)), torch.sigmoid(self.convr(hx))
        q = torch.tanh(self.convq(torch.cat([r * h, x], dim=1)))
        return (1 - z) * h + z * q


class _Motion(nn.Module):
    def __init__(self, corr_channels: int):
        super().__init__()
        self.convcorr1 = _ConvNorm(corr_channels, 256, 1)
        self.convcorr2 = _ConvNorm(256, 192, 3)
        self.convflow1 = _ConvNorm(2, 128, 7)
        self.convflow2 = _ConvNorm(128, 64, 3)
        self.conv = _ConvNorm(192 + 64, 128 - 2, 3)

    def forward(self, flow: torch.Tensor, corr: torch.Tensor) -> torch.Tensor:
        c = self.convcorr2(self.convcorr1(corr))
        f = self.convflow2(self.convflow1(flow))
        return torch.cat([self.conv(torch.cat([c, f], dim=1)), flow], dim=1)


class _Recurrent(nn.Module):
    def __init__(self, hidden: int, cin: int):
        super().__init__()
        self.convgru1 = _GRU(hidden, cin, (1, 5))
        self.convgru2 = _GRU(hidden, cin, (5, 1))

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.convgru2(self.convgru1(h, x), x)


class _FlowHead(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.conv1 = _conv(hidden, 256, 3)
        self.conv2 = _conv(256, 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(F.relu(self.conv1(x)))


class _Update(nn.Module):
    def __init__(self, corr_channels: int, hidden: int, context: int):
        super().__init__()
        self.motion_encoder = _Motion(corr_channels)
        self.recurrent_block = _Recurrent(hidden, 128 + context)
        self.flow_head = _FlowHead(hidden)


class _Mask(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.convrelu = _ConvNorm(hidden, 256, 3)
        self.conv = nn.Conv2d(256, 8 * 8 * 9, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.25 * self.conv(self.convrelu(x))


def _sample_at(volume: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """Bilinear samples of `volume` [N,1,h,w] at pixel coordinates `coords` [N,a,b,2] (x, y), zero outside."""
    h, w = volume.shape[-2:]
    x, y = coords.split(1, dim=-1)
    x = 2 * x / (w - 1) - 1
    if h > 1:
        y = 2 * y / (h - 1) - 1
    return F.grid_sample(volume, torch.cat([x, y], dim=-1), mode="bilinear", align_corners=True)


class Raft(nn.Module):
    """RAFT-large: forward(image1, image2) [B,3,H,W] in [-1, 1] (sides multiples of 8, at least 128) -> the flow
    from image1 to image2 [B,2,H,W] in pixels, after the last of the 12 updates."""

    def __init__(self, hidden: int = 128):
        super().__init__()
        self.hidden = hidden
        self.feature_encoder = _Encoder("instance")
        self.context_encoder = _Encoder("batch")
        corr_channels = LEVELS * (2 * RADIUS + 1) ** 2
        self.update_block = _Update(corr_channels, hidden, 256 - hidden)
        self.mask_predictor = _Mask(hidden)

    def _pyramid(self, f1: torch.Tensor, f2: torch.Tensor) -> list[torch.Tensor]:
        b, c, h, w = f1.shape
        corr = torch.matmul(f1.reshape(b, c, h * w).transpose(1, 2), f2.reshape(b, c, h * w))
        corr = (corr / torch.sqrt(torch.tensor(c))).reshape(b * h * w, 1, h, w)
        levels = [corr]
        for _ in range(LEVELS - 1):
            levels.append(F.avg_pool2d(levels[-1], 2, stride=2))
        return levels

    def _lookup(self, pyramid: list[torch.Tensor], coords: torch.Tensor) -> torch.Tensor:
        side = 2 * RADIUS + 1
        steps = torch.linspace(-RADIUS, RADIUS, side)
        delta = torch.stack(torch.meshgrid(steps, steps, indexing="ij"), dim=-1).view(1, side, side, 2)
        b, _, h, w = coords.shape
        centres = coords.permute(0, 2, 3, 1).reshape(b * h * w, 1, 1, 2)
        out = []
        for volume in pyramid:
            out.append(_sample_at(volume, centres + delta).view(b, h, w, -1))
            centres = centres / 2
        return torch.cat(out, dim=-1).permute(0, 3, 1, 2).contiguous()

    def forward(self, image1: torch.Tensor, image2: torch.Tensor) -> torch.Tensor:
        b, _, h, w = image1.shape
        if h % 8 or w % 8 or min(h, w) < 128:
            raise ValueError(f"RAFT needs sides that are multiples of 8 and at least 128, got {w}x{h}")
        f1, f2 = self.feature_encoder(torch.cat([image1, image2])).chunk(2)
        pyramid = self._pyramid(f1, f2)
        state, context = self.context_encoder(image1).split([self.hidden, 256 - self.hidden], dim=1)
        state, context = torch.tanh(state), F.relu(context)
        ys, xs = torch.meshgrid(torch.arange(h // 8), torch.arange(w // 8), indexing="ij")
        start = torch.stack([xs, ys]).float()[None].repeat(b, 1, 1, 1)
        coords = start.clone()
        update = self.update_block
        for _ in range(UPDATES):
            corr = self._lookup(pyramid, coords)
            motion = update.motion_encoder(coords - start, corr)
            state = update.recurrent_block(state, torch.cat([context, motion], dim=1))
            coords = coords + update.flow_head(state)
        return _upsample(coords - start, self.mask_predictor(state))


def _upsample(flow: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The flow at 8x its size: each new pixel a softmax-weighted mix of the 3x3 coarse neighbours (times 8)."""
    b, c, h, w = flow.shape
    weights = torch.softmax(mask.view(b, 1, 9, 8, 8, h, w), dim=2)
    patches = F.unfold(8 * flow, kernel_size=3, padding=1).view(b, c, 9, 1, 1, h, w)
    up = torch.sum(weights * patches, dim=2)
    return up.permute(0, 1, 4, 2, 5, 3).reshape(b, c, 8 * h, 8 * w)


def is_raft(sd: dict) -> bool:
    return all(any(k.startswith(p) for k in sd) for p in ("feature_encoder.", "context_encoder.", "update_block."))


def load_raft(sd: dict[str, torch.Tensor]) -> Raft:
    """RAFT-large from a torchvision state dict (any float dtype: the network runs in float32)."""
    if not is_raft(sd):
        raise ValueError(
            "not a torchvision RAFT-large state dict: it needs 'feature_encoder.', 'context_encoder.' and "
            "'update_block.' keys"
        )
    model = Raft()
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in sd.items()})
    return model.eval()


def demo_raft_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """RAFT-large's full layout with seeded weights (a stand-in for raft_large_C_T_SKHT_V2: the loader builds exactly
    RAFT-large, so the file cannot be smaller), float16 to halve the file; batch norms at identity. The weights are
    drawn at half the usual scale: the 12 recurrent updates then contract, as a trained RAFT's do, instead of
    amplifying float rounding (at full scale two thread counts' flows differ by thousands of ulps)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in Raft().state_dict().items():
        if key.endswith("num_batches_tracked"):
            out[key] = torch.zeros((), dtype=torch.long)
        elif key.endswith(("running_var", "norm.weight")) or (value.dim() == 1 and ".1.weight" in key):
            out[key] = torch.ones_like(value)
        elif value.dim() == 1:
            out[key] = torch.zeros_like(value)
        else:
            fan_in = value[0].numel()
            out[key] = torch.randn(value.shape, generator=gen) * 0.5 / fan_in**0.5
    return {k: v.half() if v.is_floating_point() else v for k, v in out.items()}
