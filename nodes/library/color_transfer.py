"""Today's ComfyUI Color Transfer (`comfy_extras.nodes_post_processing`, added after 0.3.64): gives target
images the colours of reference images.

Methods: `reinhard_lab` matches each Lab channel's mean and spread; `mkl_lab` maps the Lab colour
distribution with the Monge-Kantorovich linear transform (means and full 3x3 covariances); `histogram`
matches each RGB channel's 256-bin histogram. Statistics of the targets are taken per frame, pooled over
all frames (`uniform`, one transform for all), or from one chosen frame (`target_frame`, one transform);
`strength` blends between the target (0) and the full transfer (1) and beyond."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from nodes.dynamic_inputs import DynamicSection, combo_inputs, dynamic_combo

EPS = 1e-6
BINS = 256
METHODS = ["reinhard_lab", "mkl_lab", "histogram"]
SOURCE_STATS = dynamic_combo(
    {
        "per_frame": {},
        "uniform": {},
        "target_frame": {
            "target_index": (
                "INT",
                {
                    "default": 0,
                    "min": 0,
                    "max": 10000,
                    "tooltip": "The target frame whose colours define the one transform for all frames.",
                },
            )
        },
    },
    tooltip="per_frame: each frame matched on its own; uniform: all frames' colours pooled into one transform; "
    "target_frame: one frame's colours define the transform applied to every frame.",
)


def _kornia_color() -> ModuleType:
    """kornia's colour conversions, imported on first use: a GPU check's machine gets no kornia (its wheels
    would not fit beside the repository in what travels there, see scripts/gpu_check.sh) and never runs this."""
    try:
        import kornia.color
    except ImportError as e:
        raise RuntimeError("ColorTransfer's Lab modes need the kornia package, which is not installed") from e
    return kornia.color


def _lab(frame: torch.Tensor) -> torch.Tensor:
    """One [H,W,3] RGB frame as Lab channels [3, H*W]."""
    return _kornia_color().rgb_to_lab(frame.float().permute(2, 0, 1).unsqueeze(0)).reshape(3, -1)


def _stats(samples: list[torch.Tensor], full: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean [3,1] and spread of the pooled channels: std [3,1], or the 3x3 covariance when `full`.
    Pooled as ComfyUI does: the mean of the frames' means, then the mean of the frames' (co)variances."""
    mean = torch.stack([s.mean(dim=1, keepdim=True) for s in samples]).mean(0)
    if full:
        return mean, torch.stack([(s - mean) @ (s - mean).T / s.shape[1] for s in samples]).mean(0)
    var = torch.stack([((s - mean) ** 2).mean(dim=1, keepdim=True) for s in samples]).mean(0)
    return mean, var.sqrt().clamp_min(EPS)


def mkl_matrix(cov_source: torch.Tensor, cov_ref: torch.Tensor) -> torch.Tensor:
    """T with T cov_source T^T = cov_ref, the Monge-Kantorovich linear map (Pitie & Kokaram 2007)."""
    values, vectors = torch.linalg.eigh(cov_source)
    root = values.clamp_min(0).sqrt().clamp_min(EPS)
    whiten = vectors * root  # Cs^(1/2) in the eigenbasis
    inner_values, inner_vectors = torch.linalg.eigh(whiten.T @ cov_ref @ whiten)
    middle = (inner_vectors * inner_values.clamp_min(0).sqrt()) @ inner_vectors.T
    inverse = vectors / root
    return inverse @ middle @ inverse.T


def _affine(source: tuple, ref: tuple, method: str) -> Callable[[torch.Tensor], torch.Tensor]:
    (s_mean, s_spread), (r_mean, r_spread) = source, ref
    if method == "reinhard_lab":
        return lambda x: (x - s_mean) * (r_spread / s_spread) + r_mean
    matrix = mkl_matrix(s_spread, r_spread)
    return lambda x: matrix @ (x - s_mean) + r_mean


def _cdf(frames: torch.Tensor) -> torch.Tensor:
    """Per-channel cumulative histogram [3, BINS] of RGB frames [N,H,W,3], pooled over the frames."""
    bins = (frames.float() * (BINS - 1)).long().clamp(0, BINS - 1).permute(3, 0, 1, 2).reshape(3, -1)
    hist = torch.zeros(3, BINS).scatter_add_(1, bins, torch.ones_like(bins, dtype=torch.float32))
    cdf = hist.cumsum(1)
    return cdf / cdf[:, -1:]


def _lut(source: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """For each channel and source bin, the reference level at the same cumulative share."""
    return torch.searchsorted(ref, source).clamp_max(BINS - 1).float() / (BINS - 1)


def _histogram(target: torch.Tensor, ref: torch.Tensor, mode: str, index: int) -> torch.Tensor:
    uniform = (
        None
        if mode == "per_frame"
        else _lut(_cdf(target[min(index, len(target) - 1)][None] if mode == "target_frame" else target), _cdf(ref))
    )
    out = []
    for i, frame in enumerate(target):
        lut = uniform if uniform is not None else _lut(_cdf(frame[None]), _cdf(ref[min(i, len(ref) - 1)][None]))
        levels = (frame.float() * (BINS - 1)).long().clamp(0, BINS - 1).permute(2, 0, 1).reshape(3, -1)
        out.append(lut.gather(1, levels).reshape(3, *frame.shape[:2]).permute(1, 2, 0))
    return torch.stack(out)


def _lab_transfer(target: torch.Tensor, ref: torch.Tensor, method: str, mode: str, index: int) -> torch.Tensor:
    full = method == "mkl_lab"
    refs = [_lab(frame) for frame in ref]
    pooled_ref = _stats(refs, full)
    if mode != "per_frame":
        frames = [target[min(index, len(target) - 1)]] if mode == "target_frame" else list(target)
        shared = _affine(_stats([_lab(f) for f in frames], full), pooled_ref, method)
    out = []
    for i, frame in enumerate(target):
        lab = _lab(frame)
        if mode == "per_frame":
            # one reference frame: its own stats; several: the frame with the same index (the last if fewer)
            ref_stats = pooled_ref if len(refs) == 1 else _stats([refs[min(i, len(refs) - 1)]], full)
            lab = _affine(_stats([lab], full), ref_stats, method)(lab)
        else:
            lab = shared(lab)
        out.append(lab.reshape(3, *frame.shape[:2]))
    return torch.stack(out)  # Lab [N,3,H,W]


def color_transfer(
    target: torch.Tensor, ref: torch.Tensor | None, method: str, mode: str, index: int, strength: float
) -> torch.Tensor:
    if strength == 0 or ref is None:
        return target
    if method not in METHODS:
        raise ValueError(f"Color Transfer: unknown method {method!r} (one of {', '.join(METHODS)})")
    if mode not in ("per_frame", "uniform", "target_frame"):
        raise ValueError(f"Color Transfer: unknown source_stats {mode!r}")
    if method == "histogram":
        matched = _histogram(target, ref, mode, index)
        result = matched if strength == 1.0 else torch.lerp(target.float(), matched, strength)
        return result.clamp(0, 1)
    lab = _lab_transfer(target, ref, method, mode, index)
    if strength != 1.0:
        source = torch.stack([_lab(f).reshape(3, *f.shape[:2]) for f in target])
        lab = torch.lerp(source, lab, strength)
    return _kornia_color().lab_to_rgb(lab).permute(0, 2, 3, 1).clamp(0, 1)


class ColorTransfer:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_post_processing"
    FUNCTION = "execute"
    CATEGORY = "image/postprocessing"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "image_target": ("IMAGE", {"tooltip": "The images whose colours change."}),
                    "method": ("COMBO", {"multiselect": False, "options": METHODS}),
                    "source_stats": SOURCE_STATS,
                    "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01}),
                }
            ),
            "optional": {
                "image_ref": (
                    "IMAGE",
                    {"tooltip": "The images whose colours are taken; without it the targets pass unchanged."},
                )
            },
        }

    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("image",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = [
        "color match",
        "color grading",
        "color correction",
        "match colors",
        "color transform",
        "mkl",
        "reinhard",
        "histogram",
    ]
    DESCRIPTION = "Gives the target images the colours of the reference images (Reinhard, MKL or histogram matching)."

    def execute(
        self,
        image_target: torch.Tensor,
        method: str,
        source_stats: str,
        strength: float = 1.0,
        image_ref: torch.Tensor | None = None,
        **kwargs: Any,
    ):
        index = combo_inputs(kwargs, "source_stats").get("target_index", 0)
        return (color_transfer(image_target, image_ref, method, source_stats, index, strength),)


NODE_CLASS_MAPPINGS = {"ColorTransfer": ColorTransfer}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
