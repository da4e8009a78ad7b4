"""Depth Anything 3 (ByteDance-Seed), the monocular variants (DA3 Mono-Large, DA3 Metric-Large): a DINOv2 ViT whose
final-normed patch tokens after four layers feed a DPT head (per-layer 1x1 projections resampled to 4x, 2x, 1x and
1/2 of the patch grid, a four-stage fusion chain, an output convolution upsampled to the input size) with a depth
branch (exp) and a sky branch (ReLU). A head with two output channels also gives a confidence (exp + 1).

Facts (ComfyUI's key layout and config, the forward, the pre- and post-processing) from ComfyUI's newest source:
comfy/ldm/depth_anything_3/{model,dpt,preprocess}.py, comfy/image_encoders/dino2.py (get_intermediate_layers_da3)
and comfy_extras/nodes_depth_anything_3.py (Comfy-Org/ComfyUI, read 2026-12; newer than 0.10.0, the model's
directory was not in the index, the files were found by content). The code is ours; the ViT is MoGe's
(nodes/models/moge.py: the same DINOv2, read from ComfyUI's renamed keys). The Small/Base variants (a DualDPT head,
RoPE, QK-norm, alternating view attention, camera tokens and decoders: the multi-view path) are refused by name.
Checked against that code run on the same tiny weights by tests/models/test_depth_anything3.py."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from cluster.local import torch_threads

from .moge import BACKBONE as _MOGE_BACKBONE
from .moge import DinoV2, _from_comfy_names, _PointwiseConv, bilinear

PATCH = 14
IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
HEAD_HIDDEN = 32  # the width of the depth and sky branches' middle convolution, fixed in DA3
# the four ViT layers the head reads, by depth (DA3's configs: ViT-S/B read 5,7,9,11; ViT-L 4,11,17,23)
OUT_LAYERS = {12: (5, 7, 9, 11), 24: (4, 11, 17, 23)}
SKY_THRESHOLD = 0.3  # sky probability from which a pixel counts as sky in the renders
SAMPLE_LIMIT = 100_000  # quantiles over more pixels than this are taken over a random sample of this many
# markers of the multi-view variants (DA3-Small/Base): DualDPT's layer norm and auxiliary ray branch, the camera
# token, QK-norm, the camera encoder / decoder
_MULTIVIEW_MARKERS = ("head.norm.", "head.scratch.refinenet1_aux.", "backbone.embeddings.camera_token", "cam_dec.")


def _align_corners_resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    # on one thread: the CPU bilinear kernel rounds some sizes by the thread count (as MoGe's resizes)
    with torch_threads(1):
        return F.interpolate(x, size=size, mode="bilinear", align_corners=True)


class _ResidualUnit(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.relu(self.conv1(F.relu(x))))


class _Fusion(nn.Module):
    """Adds the skip (through its own residual unit), refines, resamples to the next stage's size (or 2x)."""

    def __init__(self, width: int, skip: bool) -> None:
        super().__init__()
        if skip:
            self.resConfUnit1 = _ResidualUnit(width)
        self.resConfUnit2 = _ResidualUnit(width)
        self.out_conv = _PointwiseConv(width, width, 1)

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None, size=None) -> torch.Tensor:
        if skip is not None:
            x = x + self.resConfUnit1(skip)
        x = self.resConfUnit2(x)
        size = tuple(size) if size is not None else (2 * x.shape[-2], 2 * x.shape[-1])
        return self.out_conv(_align_corners_resize(x, size))


class _Scratch(nn.Module):
    def __init__(self, channels: tuple[int, ...], width: int, outputs: int, sky: bool) -> None:
        super().__init__()
        for i, c in enumerate(channels):
            setattr(self, f"layer{i + 1}_rn", nn.Conv2d(c, width, 3, padding=1, bias=False))
        for i in range(1, 5):
            setattr(self, f"refinenet{i}", _Fusion(width, skip=i < 4))
        self.output_conv1 = nn.Conv2d(width, width // 2, 3, padding=1)
        self.output_conv2 = self._branch(width // 2, outputs)
        if sky:
            self.sky_output_conv2 = self._branch(width // 2, 1)

    @staticmethod
    def _branch(c_in: int, c_out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(c_in, HEAD_HIDDEN, 3, padding=1), nn.ReLU(), _PointwiseConv(HEAD_HIDDEN, c_out, 1)
        )


class DPTHead(nn.Module):
    """DA3's single DPT head over four token maps [B, N, C] of a ph x pw patch grid."""

    def __init__(self, dim: int, channels: tuple[int, ...], width: int, outputs: int, sky: bool) -> None:
        super().__init__()
        self.projects = nn.ModuleList(_PointwiseConv(dim, c, 1) for c in channels)
        self.resize_layers = nn.ModuleList(
            [
                nn.ConvTranspose2d(channels[0], channels[0], 4, stride=4),
                nn.ConvTranspose2d(channels[1], channels[1], 2, stride=2),
                nn.Identity(),
                nn.Conv2d(channels[3], channels[3], 3, stride=2, padding=1),
            ]
        )
        self.scratch = _Scratch(channels, width, outputs, sky)
        self.outputs, self.sky = outputs, sky

    def forward(self, tokens: list[torch.Tensor], height: int, width: int) -> dict[str, torch.Tensor]:
        ph, pw = height // PATCH, width // PATCH
        maps = []
        for i, t in enumerate(tokens):
            grid = t.transpose(1, 2).reshape(t.shape[0], t.shape[2], ph, pw)
            maps.append(self.resize_layers[i](self.projects[i](grid)))
        s = self.scratch
        l1, l2, l3, l4 = (getattr(s, f"layer{i + 1}_rn")(m) for i, m in enumerate(maps))
        x = s.refinenet4(l4, size=l3.shape[-2:])
        x = s.refinenet3(x, l3, size=l2.shape[-2:])
        x = s.refinenet2(x, l2, size=l1.shape[-2:])
        x = s.refinenet1(x, l1)
        feat = _align_corners_resize(s.output_conv1(x), (ph * PATCH, pw * PATCH))
        logits = s.output_conv2(feat)
        out = {"depth": torch.exp(logits[:, 0])}
        if self.outputs > 1:  # the last channel is the confidence
            out["depth_conf"] = torch.exp(logits[:, -1]) + 1
        if self.sky:
            out["sky"] = F.relu(s.sky_output_conv2(feat))[:, 0]
        return out


class DepthAnything3(nn.Module):
    """backbone (DINOv2 in Meta's names, as MoGe reads it) + DPT head; the state dict is ComfyUI's layout."""

    def __init__(
        self, dim: int, depth: int, grid: int, channels: tuple[int, ...], width: int, outputs: int, sky: bool
    ) -> None:
        super().__init__()
        if depth not in OUT_LAYERS:
            raise NotImplementedError(f"Depth Anything 3 with a {depth}-layer ViT is not known (12 or 24 layers)")
        self.backbone = DinoV2(dim, depth, grid, swiglu=False)
        self.head = DPTHead(dim, channels, width, outputs, sky)
        self.out_layers = list(OUT_LAYERS[depth])

    def forward(self, pixels: torch.Tensor) -> dict[str, torch.Tensor]:
        """[B, 3, H, W] ImageNet-normalised, H and W multiples of 14 -> depth, sky (and depth_conf) [B, H, W]."""
        feats = self.backbone.layer_features(pixels, self.out_layers)
        return self.head([patches for patches, _ in feats], pixels.shape[-2], pixels.shape[-1])


def is_depth_anything3(keys) -> bool:
    keys = set(keys)
    return "backbone.embeddings.patch_embeddings.projection.weight" in keys and "head.projects.0.weight" in keys


def unsupported_variant(keys) -> str | None:
    """Why a DA3 file cannot run here (the multi-view Small/Base variants), or None."""
    for key in keys:
        if key.startswith(_MULTIVIEW_MARKERS) or ".attention.q_norm." in key:
            return "Depth Anything 3 Small/Base (a DualDPT head and multi-view camera layers)"
    return None


def build_depth_anything3(sd: dict[str, torch.Tensor]) -> DepthAnything3:
    """A mono DA3 model from a state dict in ComfyUI's layout, float32 on the CPU, in eval mode."""
    sd = {k.removeprefix("model.diffusion_model."): v for k, v in sd.items()}
    why = unsupported_variant(sd)
    if why:
        raise NotImplementedError(f"{why} is not supported yet; the Mono and Metric variants are")
    dim = sd["backbone.embeddings.patch_embeddings.projection.weight"].shape[0]
    depth = 1 + max(int(k.split(".")[3]) for k in sd if k.startswith("backbone.encoder.layer."))
    grid = math.isqrt(sd["backbone.embeddings.position_embeddings"].shape[1] - 1)
    channels = tuple(sd[f"head.projects.{i}.weight"].shape[0] for i in range(4))
    width = sd["head.scratch.layer1_rn.weight"].shape[0]
    outputs = sd["head.scratch.output_conv2.2.weight"].shape[0]
    sky = "head.scratch.sky_output_conv2.0.weight" in sd
    model = DepthAnything3(dim, depth, grid, channels, width, outputs, sky)
    # the ViT's keys renamed to Meta's through MoGe's reader (it expects them under its own prefix)
    moved = {(_MOGE_BACKBONE + k[len("backbone.") :] if k.startswith("backbone.") else k): v for k, v in sd.items()}
    renamed = _from_comfy_names(moved)
    renamed = {
        ("backbone." + k[len(_MOGE_BACKBONE) :] if k.startswith(_MOGE_BACKBONE) else k): v for k, v in renamed.items()
    }
    renamed.setdefault("backbone.mask_token", torch.zeros(1, dim))  # DA3 files have no mask token (unused)
    model.load_state_dict({k: v.float() for k, v in renamed.items()}, strict=True)
    return model.eval()


# ---------------------------------------------------------------- pre- and post-processing


def _nearest_multiple(x: int) -> int:
    down = x // PATCH * PATCH
    return down + PATCH if abs(down + PATCH - x) <= abs(x - down) else down


def target_size(height: int, width: int, resolution: int, method: str) -> tuple[int, int]:
    """The model's input size: the longest (upper_bound_resize) or shortest side scaled to `resolution`, each side
    rounded to the nearest multiple of 14 (ties up)."""
    if method == "upper_bound_resize":
        scale = resolution / float(max(height, width))
    elif method == "lower_bound_resize":
        scale = resolution / float(min(height, width))
    else:
        raise ValueError(f"resize_method: unknown {method!r}")
    return max(1, _nearest_multiple(int(round(height * scale)))), max(1, _nearest_multiple(int(round(width * scale))))


def preprocess(image: torch.Tensor, resolution: int, method: str) -> torch.Tensor:
    """[1, H, W, 3] in 0..1 -> [1, 3, h, w] ImageNet-normalised at the model's size (Lanczos on 8-bit values, as
    ComfyUI's common_upscale)."""
    from nodes.upscale import common_upscale

    h, w = target_size(image.shape[1], image.shape[2], resolution, method)
    x = image.movedim(-1, 1).float().contiguous()
    if (h, w) != tuple(x.shape[-2:]):
        x = common_upscale(x, w, h, "lanczos", "disabled")
    x = x.clamp(0.0, 1.0)
    mean = torch.tensor(IMAGE_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGE_STD).view(1, 3, 1, 1)
    return (x - mean) / std


@torch.no_grad()
def infer(model: DepthAnything3, image: torch.Tensor, resolution: int, method: str) -> dict[str, torch.Tensor]:
    """[B, H, W, 3] in 0..1 -> depth [B, H, W] (and sky / confidence when the head has them), image by image at the
    model's size, then bilinearly resized back to H x W."""
    height, width = image.shape[1:3]
    found: dict[str, list[torch.Tensor]] = {}
    for i in range(image.shape[0]):
        out = model(preprocess(image[i : i + 1, ..., :3], resolution, method))
        for name, value in out.items():
            found.setdefault(name, []).append(bilinear(value[:, None].float(), (height, width))[:, 0])
    names = {"depth": "depth", "sky": "sky", "depth_conf": "confidence"}
    return {names[k]: torch.cat(v) for k, v in found.items()}


def _quantile_sample(values: torch.Tensor) -> torch.Tensor:
    if values.numel() <= SAMPLE_LIMIT:
        return values
    # ComfyUI samples from the global random state (a different pick each run); a fixed seed keeps ours repeatable
    gen = torch.Generator().manual_seed(0)
    return values[torch.randint(0, values.numel(), (SAMPLE_LIMIT,), generator=gen)]


def sky_clip(depth: torch.Tensor, sky: torch.Tensor) -> torch.Tensor:
    """[H, W]: the sky's depth set to the 99th percentile of the rest (unchanged with 10 or fewer of either)."""
    ground = sky < SKY_THRESHOLD
    if int(ground.sum()) <= 10 or int((~ground).sum()) <= 10:
        return depth.clone()
    far = torch.quantile(_quantile_sample(depth[ground]), 0.99)
    return torch.where(ground, depth, far)


def v2_normalized(depth: torch.Tensor, sky: torch.Tensor | None) -> torch.Tensor:
    """[H, W] -> 0..1, near white: between the 1st and 99th percentiles of the non-sky depth; the sky black."""
    ground = sky < SKY_THRESHOLD if sky is not None else None
    valid = depth[ground] if ground is not None and bool(ground.any()) else depth.flatten()
    valid = _quantile_sample(valid)
    lo, hi = torch.quantile(valid, 0.01), torch.quantile(valid, 0.99)
    norm = 1.0 - ((depth - lo) / (hi - lo).clamp(min=1e-6)).clamp(0.0, 1.0)
    if ground is not None:
        norm = torch.where(ground, norm, torch.zeros_like(norm))
    return norm


def min_max_normalized(depth: torch.Tensor) -> torch.Tensor:
    """[B, H, W] -> 0..1 per image, near white."""
    lo = depth.amin(dim=(-2, -1), keepdim=True)
    hi = depth.amax(dim=(-2, -1), keepdim=True)
    return 1.0 - ((depth - lo) / (hi - lo).clamp(min=1e-6)).clamp(0.0, 1.0)


def confidence_normalized(conf: torch.Tensor) -> torch.Tensor:
    """[B, H, W] -> 0..1 per image (all ones where an image's confidence is flat)."""
    out = []
    for c in conf:
        lo, hi = c.min(), c.max()
        out.append((c - lo) / (hi - lo) if hi > lo else torch.ones_like(c))
    return torch.stack(out)
