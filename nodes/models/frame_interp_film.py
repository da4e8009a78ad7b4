"""FILM (Frame Interpolation for Large Motion, Reda et al. 2022) as ComfyUI's FrameInterpolationModelLoader builds it
(comfy_extras/frame_interpolation_models/film_net.py, newest ComfyUI; Comfy-Org/frame_interpolation's
film_net_fp16.safetensors): written from its structure, parameter names ComfyUI's (`extract.extract_sublevels`,
`predict_flow._predictor / _predictors`, `fuse.convs / output_conv`).

Seven-level image pyramids, each level's features from a shared 4-deep extractor stacked across levels; a coarse-to-fine
flow estimator (the deepest predictor shared by levels 6..3, one of its own for 2, 1, 0) run both ways; both frames'
images and features warped by the flows scaled to the timestep, fused by a U-Net-like decoder over five levels."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

PYRAMID_LEVELS, FUSION_LEVELS, SPECIALIZED, SUB_LEVELS, FILTERS = 7, 5, 3, 4, 64
FLOW_CONVS, FLOW_FILTERS = (3, 3, 3, 3), (32, 64, 128, 256)


class FilmConv(nn.Module):
    """A convolution, LeakyReLU(0.2) after it unless `act` is False; even kernels pad one pixel at right and bottom
    (TensorFlow's 'same'), odd ones symmetrically."""

    def __init__(self, cin: int, cout: int, size: int, act: bool = True) -> None:
        super().__init__()
        self.even = size % 2 == 0
        self.conv = nn.Conv2d(cin, cout, size, padding=0 if self.even else size // 2)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(F.pad(x, (0, 1, 0, 1)) if self.even else x)
        return F.leaky_relu(x, 0.2) if self.act else x


def warp(image: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """`image` sampled at each pixel moved by `flow` (pixels; pixel-centre grid, border padding), in float32."""
    h, w = flow.shape[2], flow.shape[3]
    xs = torch.linspace(-(1 - 1 / w), 1 - 1 / w, w, dtype=torch.float32, device=flow.device)
    ys = torch.linspace(-(1 - 1 / h), 1 - 1 / h, h, dtype=torch.float32, device=flow.device)
    dx = flow[:, 0].float() / (w * 0.5)
    dy = flow[:, 1].float() / (h * 0.5)
    grid = torch.stack([xs[None, None, :] + dx, ys[None, :, None] + dy], dim=3)
    out = F.grid_sample(image.float(), grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out.to(image.dtype)


class SubTree(nn.Module):
    def __init__(self, filters: int, depth: int) -> None:
        super().__init__()
        chans = [3] + [filters << i for i in range(depth)]
        self.convs = nn.ModuleList(
            nn.Sequential(FilmConv(chans[i], chans[i + 1], 3), FilmConv(chans[i + 1], chans[i + 1], 3))
            for i in range(depth)
        )

    def forward(self, image: torch.Tensor, n: int) -> list[torch.Tensor]:
        """The first `n` depths' features, each at half the size of the one before."""
        out, head = [], image
        for i in range(n):  # ComfyUI runs every depth; those past n are never read
            head = self.convs[i](head if i == 0 else F.avg_pool2d(head, 2, 2))
            out.append(head)
        return out


class Extractor(nn.Module):
    def __init__(self, filters: int, depth: int) -> None:
        super().__init__()
        self.extract_sublevels = SubTree(filters, depth)
        self.depth = depth

    def forward(self, images: list[torch.Tensor]) -> list[torch.Tensor]:
        subs = [self.extract_sublevels(img, min(len(images) - i, self.depth)) for i, img in enumerate(images)]
        # level i stacks depth j of the pyramid level j steps finer, for every j reaching it
        return [torch.cat([subs[i - j][j] for j in range(min(i + 1, self.depth))], 1) for i in range(len(images))]


class FlowEstimator(nn.Module):
    def __init__(self, cin: int, n: int, filters: int) -> None:
        super().__init__()
        convs = [FilmConv(cin if i == 0 else filters, filters, 3) for i in range(n)]
        convs += [FilmConv(filters, filters // 2, 1), FilmConv(filters // 2, 2, 1, act=False)]
        self._convs = nn.ModuleList(convs)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x = torch.cat([a, b], 1)
        for conv in self._convs:
            x = conv(x)
        return x


class PyramidFlow(nn.Module):
    def __init__(self, filters: int, convs: tuple[int, ...], widths: tuple[int, ...]) -> None:
        super().__init__()
        cins = [(filters << 1) + sum(filters << (j + 2) for j in range(i)) for i in range(len(convs))]
        predictors = [FlowEstimator(cins[i], convs[i], widths[i]) for i in range(len(convs))]
        self._predictor = predictors[-1]  # the deepest: shared by every level from len(convs) - 1 down
        self._predictors = nn.ModuleList(predictors[:-1][::-1])  # level len-2 first, level 0 last

    def forward(self, fa: list[torch.Tensor], fb: list[torch.Tensor]) -> list[torch.Tensor]:
        """The flow residuals from a to b at every level, finest first."""
        special = len(self._predictors)
        v = self._predictor(fa[-1], fb[-1])
        residuals = [v]
        for i in range(len(fa) - 2, -1, -1):
            predictor = self._predictor if i >= special else self._predictors[special - 1 - i]
            v = F.interpolate(v, size=fa[i].shape[2:4], mode="bilinear") * 2
            residual = predictor(fa[i], warp(fb[i], v))
            residuals.append(residual)
            v = v + residual
        return residuals[::-1]


def _synthesize(residuals: list[torch.Tensor]) -> list[torch.Tensor]:
    """The flow at every level (finest first) from its residuals: each coarser flow upsampled, doubled, added."""
    flow = residuals[-1]
    flows = [flow]
    for residual in residuals[-2::-1]:
        flow = F.interpolate(flow, size=residual.shape[2:4], mode="bilinear") * 2 + residual
        flows.append(flow)
    return flows[::-1]


def _fusion_channels(level: int, filters: int) -> int:
    """Channels of the aligned pyramid at `level` for a fusion of `level` levels: both frames' stacked features,
    images (3) and flows (2)."""
    return (sum(filters << i for i in range(level)) + 5) * 2


class Fusion(nn.Module):
    def __init__(self, levels: int, specialized: int, filters: int) -> None:
        super().__init__()
        self.output_conv = nn.Conv2d(filters, 3, 1)
        self.convs = nn.ModuleList()
        cin, extra = _fusion_channels(levels, filters), 0
        for i in range(levels - 1, -1, -1):
            width = filters << min(i, specialized)
            self.convs.append(
                nn.ModuleList(
                    [
                        FilmConv(cin, width, 2, act=False),
                        FilmConv(cin + (extra or width), width, 3),
                        FilmConv(width, width, 3),
                    ]
                )
            )
            cin, extra = width, _fusion_channels(i, filters) - width // 2

    def forward(self, pyramid: list[torch.Tensor]) -> torch.Tensor:
        x = pyramid[-1]
        for k, (up, conv1, conv2) in enumerate(self.convs):
            level = len(self.convs) - 1 - k
            x = up(F.interpolate(x, size=pyramid[level].shape[2:4], mode="nearest"))
            x = conv2(conv1(torch.cat([pyramid[level], x], 1)))
        return self.output_conv(x)


class Film(nn.Module):
    pad_align = 1

    def __init__(self) -> None:
        super().__init__()
        self.extract = Extractor(FILTERS, SUB_LEVELS)
        self.predict_flow = PyramidFlow(FILTERS, FLOW_CONVS, FLOW_FILTERS)
        self.fuse = Fusion(SUB_LEVELS, SPECIALIZED, FILTERS)

    def features(self, img: torch.Tensor):
        images = [img]
        for _ in range(PYRAMID_LEVELS - 1):
            images.append(F.avg_pool2d(images[-1], 2, 2))
        return images, self.extract(images)

    def middle(self, img0, img1, f0, f1, timesteps: list[float]) -> torch.Tensor:
        """The frames at `timesteps` between img0 and img1 ([1,3,H,W] each; f0, f1 their `features`), one flow
        estimate for all of them."""
        (images0, feats0), (images1, feats1) = f0, f1
        forward = _synthesize(self.predict_flow(feats0, feats1))[:FUSION_LEVELS]
        backward = _synthesize(self.predict_flow(feats1, feats0))[:FUSION_LEVELS]
        stacks0 = [torch.cat([i, f], 1) for i, f in zip(images0[:FUSION_LEVELS], feats0[:FUSION_LEVELS])]
        stacks1 = [torch.cat([i, f], 1) for i, f in zip(images1[:FUSION_LEVELS], feats1[:FUSION_LEVELS])]
        ts = torch.tensor(timesteps, dtype=img0.dtype, device=img0.device)
        out = []
        for k in range(len(timesteps)):
            t = ts[k : k + 1]
            back = [f * t[:, None, None, None] for f in backward]
            fwd = [f * (1 - t)[:, None, None, None] for f in forward]
            aligned = [
                torch.cat([warp(s0, b), warp(s1, f), b, f], 1) for s0, s1, b, f in zip(stacks0, stacks1, back, fwd)
            ]
            out.append(self.fuse(aligned))
        return torch.cat(out, 0)


def is_film(sd: dict) -> bool:
    return "extract.extract_sublevels.convs.0.0.conv.weight" in sd


def build_film(sd: dict[str, torch.Tensor]) -> Film:
    with torch.device("meta"):  # no initial draws: every parameter comes from the file
        model = Film()
    model.load_state_dict({k: v.float() for k, v in sd.items()}, assign=True)
    return model.eval()
