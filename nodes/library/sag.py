"""ComfyUI's comfy_extras.nodes_sag: Self-Attention Guidance. The middle block's first self-attention is
replaced by one that also keeps the negative prompt's attention map; a post-CFG function blurs the negative
prediction where that map says the model attends most, runs the negative prompt again on the blurred
latent, and pushes the result away from that prediction: result + (blurred - prediction) * scale.

Both halves run inside the same denoise step on the executor: the replacement leaves the map in the step's
model_options (nodes.modelfns.network_patches passes them to every hook) for the post-CFG function."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import with_function
from nodes.modelfns.network_patches import CALC_COND, attention, with_network_patch

MODULE = "comfy_extras.nodes_sag"
SCORES = "sag_uncond_attention"  # model_options key of the recorded map
BLOCK = ("middle", 0, 0)
THRESHOLD = 1.0


def attention_with_scores(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain softmax attention on [B, N, heads * dim] projections, also returning the probabilities
    [B * heads, N, M]."""
    b, _, inner = q.shape
    dim = inner // heads
    q, k, v = (t.reshape(b, -1, heads, dim).permute(0, 2, 1, 3).reshape(b * heads, -1, dim) for t in (q, k, v))
    probs = (torch.einsum("b i d, b j d -> b i j", q, k) * dim**-0.5).softmax(dim=-1)
    out = torch.einsum("b i j, b j d -> b i d", probs.to(v.dtype), v)
    return out.reshape(b, heads, -1, dim).permute(0, 2, 1, 3).reshape(b, -1, heads * dim), probs


def gaussian_blur(img: torch.Tensor, kernel_size: int, sigma: float) -> torch.Tensor:
    """Separable-kernel Gaussian blur per channel with reflect padding, kernel sampled on integer offsets."""
    half = (kernel_size - 1) * 0.5
    pdf = torch.exp(-0.5 * (torch.linspace(-half, half, steps=kernel_size) / sigma).pow(2))
    k1 = (pdf / pdf.sum()).to(device=img.device, dtype=img.dtype)
    kernel = torch.mm(k1[:, None], k1[None, :]).expand(img.shape[-3], 1, kernel_size, kernel_size)
    pad = kernel_size // 2
    return F.conv2d(F.pad(img, [pad] * 4, mode="reflect"), kernel, groups=img.shape[-3])


def blur_where_attended(x0: torch.Tensor, probs: torch.Tensor, sigma: float, threshold: float) -> torch.Tensor:
    """x0 blurred where the tokens' total received attention (head mean) exceeds threshold."""
    _, q_tokens, k_tokens = probs.shape
    b, _, lh, lw = x0.shape
    mask = probs.reshape(b, -1, q_tokens, k_tokens).mean(1).sum(1) > threshold
    total = mask.shape[-1]
    # The token grid: the divisor of the token count nearest the latent's aspect, searching outwards.
    guess, rows = round(math.sqrt((lh / lw) * total)), None
    for i in range(math.floor(math.sqrt(total) / 2)):
        rows = next((j for j in (guess + i, max(1, guess - i)) if total % j == 0), None)
        if rows is not None:
            break
    mask = mask.reshape(b, rows, total // rows).unsqueeze(1).type(probs.dtype)
    mask = F.interpolate(mask, (lh, lw))
    return gaussian_blur(x0, 9, sigma) * mask + x0 * (1 - mask)


@dataclass(frozen=True)
class RecordingAttention:
    """attn1 replacement: attention as usual; when the batch holds the negative prompt, its map is kept."""

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: dict) -> torch.Tensor:
        heads, sides = options["n_heads"], options["cond_or_uncond"]
        if 1 not in sides:
            return attention(q, k, v, heads)
        out, probs = attention_with_scores(q, k, v, heads)
        per_side = heads * (q.shape[0] // len(sides))
        index = sides.index(1)
        options["model_options"][SCORES] = probs[per_side * index : per_side * (index + 1)]
        return out


@dataclass(frozen=True)
class SelfAttentionGuidanceFunction:
    scale: float
    blur_sigma: float

    def __call__(self, args: dict) -> torch.Tensor:
        out, x, uncond = args["denoised"], args["input"], args["uncond_denoised"]
        if min(out.shape[2:]) <= 4:  # too small for the blur's padding
            return out
        options = args["model_options"]
        degraded = blur_where_attended(uncond, options[SCORES], self.blur_sigma, THRESHOLD)
        (prediction,) = options[CALC_COND](
            args["model"], [args["uncond"]], degraded + x - uncond, args["sigma"], options
        )
        return out + (degraded - prediction) * self.scale


class SelfAttentionGuidance:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Self-Attention Guidance: guides away from a prediction made on a latent blurred where the "
        "model's self-attention concentrates, improving structure and detail."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "scale": ("FLOAT", {"default": 0.5, "min": -2.0, "max": 5.0, "step": 0.01}),
                "blur_sigma": ("FLOAT", {"default": 2.0, "min": 0.0, "max": 10.0, "step": 0.1}),
            }
        }

    def patch(self, model: Any, scale: float, blur_sigma: float) -> tuple[ModelRef]:
        require_model(model)
        model = with_function(
            model, "sampler_post_cfg_function", SelfAttentionGuidanceFunction(float(scale), float(blur_sigma))
        )
        model = with_function(model, "disable_cfg1_optimization", True)
        return (with_network_patch(model, "attn1_replace", RecordingAttention(), BLOCK),)


NODE_CLASS_MAPPINGS = {"SelfAttentionGuidance": SelfAttentionGuidance}
NODE_DISPLAY_NAME_MAPPINGS = {"SelfAttentionGuidance": "Self-Attention Guidance"}
