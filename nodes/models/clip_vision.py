"""CLIP vision encoders as ComfyUI loads them (comfy.clip_vision): files in transformers' layout
(`vision_model.*`, `visual_projection.weight`, what ComfyUI's clip_vision folder holds) or OpenCLIP's
(`visual.*`), run with transformers' CLIPVisionModelWithProjection, which has the same key names.

The network sizes come from the tensors. Two settings cannot: ComfyUI takes them from the config it picks by
depth, and every CLIP vision config it ships has 16 attention heads, and quick_gelu up to ViT-L's 24
layers, gelu for the deeper ViT-H (32) and ViT-G (48); the same rule is used here. Like ComfyUI (whose
default CLIP vision dtype is float16, computed in float32), the weights are rounded to float16 on load.

`preprocess` is ComfyUI's clip_preprocess: resize (bicubic, antialiased) so that the short side fits and
center-crop, or squash to a square ("none"), then quantise to 8-bit levels and normalise."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .clip import open_clip_to_hf
from .errors import ModelLoadError

MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
HEADS = 16
OPEN_CLIP_MARKER = "visual.transformer.resblocks.0.attn.in_proj_weight"
HF_MARKER = "vision_model.embeddings.class_embedding"
UNCLIP_PREFIX = "embedder.model."  # where SD2.1 unCLIP checkpoints keep their image encoder (ComfyUI's prefix)
SVD_PREFIX = "conditioner.embedders.0.open_clip.model."  # and Stable Video Diffusion checkpoints theirs
CHECKPOINT_PREFIXES = (UNCLIP_PREFIX, SVD_PREFIX)
PROJECTOR = "multi_modal_projector."  # llava-llama3's vision file (llava_llama3_vision): its image tokens' projection
_OPEN_CLIP_VISION = {
    "class_embedding": "embeddings.class_embedding",
    "conv1.weight": "embeddings.patch_embedding.weight",
    "ln_pre.weight": "pre_layrnorm.weight",
    "ln_pre.bias": "pre_layrnorm.bias",
    "ln_post.weight": "post_layernorm.weight",
    "ln_post.bias": "post_layernorm.bias",
}


def preprocess(
    image: torch.Tensor, size: int, crop: bool, mean: tuple[float, ...] = MEAN, std: tuple[float, ...] = STD
) -> torch.Tensor:
    """IMAGE [B,H,W,C] -> normalised pixel values [B,3,size,size] (CLIP's channel statistics by default)."""
    image = image[..., :3].movedim(-1, 1)
    if image.shape[2] != size or image.shape[3] != size:
        if crop:
            scale = size / min(image.shape[2], image.shape[3])
            target = (round(scale * image.shape[2]), round(scale * image.shape[3]))
        else:
            target = (size, size)
        image = torch.nn.functional.interpolate(image, size=target, mode="bicubic", antialias=True)
        top, left = (image.shape[2] - size) // 2, (image.shape[3] - size) // 2
        image = image[:, :, top : top + size, left : left + size]
    image = torch.clip(255.0 * image, 0, 255).round() / 255.0
    mean_t = torch.tensor(mean, device=image.device, dtype=image.dtype).view(3, 1, 1)
    std_t = torch.tensor(std, device=image.device, dtype=image.dtype).view(3, 1, 1)
    return (image - mean_t) / std_t


def to_transformers_layout(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An OpenCLIP visual tower (`visual.*`, or an SD2.1 unCLIP checkpoint's `embedder.model.visual.*`, or an SVD
    checkpoint's `conditioner.embedders.0.open_clip.model.visual.*`) renamed to transformers' names; other files pass
    through."""
    for prefix in CHECKPOINT_PREFIXES:
        if prefix + OPEN_CLIP_MARKER in sd:
            sd = {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}
            break
        if prefix + "visual." + HF_MARKER in sd:  # what ComfyUI's checkpoint savers write there: transformers' names
            prefix += "visual."
            return {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}
    if OPEN_CLIP_MARKER not in sd:
        return sd
    visual = {k[len("visual.") :]: v for k, v in sd.items() if k.startswith("visual.")}
    out = {"visual_projection.weight": visual.pop("proj").t().contiguous()} if "proj" in visual else {}
    renamed = {_OPEN_CLIP_VISION.get(k, k): v for k, v in visual.items()}
    out.update({"vision_model." + k: v for k, v in open_clip_to_hf(renamed).items()})
    return out


def vision_config(sd: dict[str, torch.Tensor], path: str | None = None):
    """transformers' CLIPVisionConfig for a transformers-layout state dict."""
    from transformers import CLIPVisionConfig

    pre = "vision_model."
    if f"{pre}embeddings.class_embedding" not in sd:
        raise ModelLoadError(
            path,
            "is not a CLIP vision model Comfy Cluster can run (DINOv2 image encoders are not "
            "supported; CLIP ViT-L/H/G, SigLIP and smaller are)",
        )
    if "visual_projection.weight" not in sd and PROJECTOR + "linear_1.weight" not in sd:
        raise ModelLoadError(path, "the CLIP vision model has no visual_projection (image embeds)")
    hidden = sd[f"{pre}embeddings.class_embedding"].shape[0]
    layers = sum(1 for k in sd if k.startswith(f"{pre}encoder.layers.") and k.endswith(".layer_norm1.weight"))
    patch = sd[f"{pre}embeddings.patch_embedding.weight"].shape[-1]
    positions = sd[f"{pre}embeddings.position_embedding.weight"].shape[0]
    if hidden % HEADS or math.isqrt(positions - 1) ** 2 != positions - 1:
        raise ModelLoadError(path, f"unexpected CLIP vision sizes (width {hidden}, {positions} positions)")
    return CLIPVisionConfig(
        hidden_size=hidden,
        intermediate_size=sd[f"{pre}encoder.layers.0.mlp.fc1.weight"].shape[0],
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_channels=3,
        image_size=math.isqrt(positions - 1) * patch,
        patch_size=patch,
        projection_dim=sd["visual_projection.weight"].shape[0] if "visual_projection.weight" in sd else hidden,
        hidden_act="gelu" if layers > 30 else "quick_gelu",
        layer_norm_eps=1e-5,
    )


class LlavaProjector(torch.nn.Module):
    """llava's two-layer projection (GELU between) of the penultimate layer's patch states, the class token left out:
    ComfyUI's mm_projected, the image tokens HunyuanVideo 1.0's image-to-video prompt reads."""

    def __init__(self, width: int, out: int):
        super().__init__()
        self.linear_1 = torch.nn.Linear(width, out)
        self.linear_2 = torch.nn.Linear(out, out)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.linear_2(torch.nn.functional.gelu(self.linear_1(states[:, 1:])))


@dataclass
class ClipVisionEncoder:
    module: torch.nn.Module  # transformers' CLIPVisionModelWithProjection
    image_size: int
    projector: LlavaProjector | None = None

    def encode(self, image: torch.Tensor, crop: bool) -> dict[str, torch.Tensor]:
        """ComfyUI's CLIP_VISION_OUTPUT tensors: last_hidden_state (before the post layer norm),
        penultimate_hidden_states (the second-to-last layer's output) and image_embeds (projected)."""
        device = next(self.module.parameters()).device
        pixels = preprocess(image.to(device), self.image_size, crop).float()
        out = self.module(pixel_values=pixels, output_hidden_states=True)
        result = {
            "last_hidden_state": out.last_hidden_state,
            "image_embeds": out.image_embeds,
            "penultimate_hidden_states": out.hidden_states[-2],
        }
        if self.projector is not None:
            result["mm_projected"] = self.projector(out.hidden_states[-2])
        return result


def load_clip_vision(sd: dict[str, torch.Tensor], path: str | None = None) -> ClipVisionEncoder:
    from transformers import CLIPVisionModelWithProjection

    from .safetensors_io import build_module

    sd = to_transformers_layout(sd)
    cfg = vision_config(sd, path)
    # Only the vision tower: full CLIP files also hold a text model, which ComfyUI ignores too.
    keep = {
        k: v.to(torch.float16) if v.is_floating_point() else v
        for k, v in sd.items()
        if k.startswith("vision_model.") and not k.endswith("position_ids") or k == "visual_projection.weight"
    }
    if "visual_projection.weight" not in keep:  # llava's vision tower may come without one: its image_embeds are
        # zeros here (ComfyUI's, from a projection the file does not fill, are not meaningful either)
        keep["visual_projection.weight"] = torch.zeros(cfg.projection_dim, cfg.hidden_size, dtype=torch.float16)
    module = build_module(lambda: CLIPVisionModelWithProjection(cfg), keep, path, "CLIP vision model")
    projector = None
    if PROJECTOR + "linear_1.weight" in sd:  # rounded to float16 as the tower is (ComfyUI's CLIP vision dtype)
        weights = {k[len(PROJECTOR) :]: v.to(torch.float16) for k, v in sd.items() if k.startswith(PROJECTOR)}
        out, width = weights["linear_1.weight"].shape
        projector = build_module(lambda: LlavaProjector(width, out), weights, path, "llava projector")
    return ClipVisionEncoder(module, cfg.image_size, projector)


def is_clip_vision(keys) -> bool:
    keys = set(keys)
    return (
        OPEN_CLIP_MARKER in keys
        or any(prefix + OPEN_CLIP_MARKER in keys for prefix in CHECKPOINT_PREFIXES)
        or any(prefix + "visual." + HF_MARKER in keys for prefix in CHECKPOINT_PREFIXES)
        or HF_MARKER in keys
    )
