"""unCLIP's image conditioning: a CLIP vision image embedding, noise-augmented, as the UNet's ADM input.

The rules are ComfyUI's (comfy/model_base.py `unclip_adm`, SD21UNCLIP and SDXL's `sdxl_pooled`;
comfy/ldm/modules/encoders/noise_aug_modules.py), written here from their description:

- each image embedding (every row of every unCLIPConditioning's CLIP_VISION_OUTPUT) is noised to the level
  round(999 * noise_augmentation) of a 1000-step squaredcos_cap_v2 schedule, with noise drawn from the sampling
  seed minus 10, and joined to that level's sinusoidal embedding; the pair is scaled by the entry's strength;
- several embeddings are summed and the sum is noised again at the merge level (0.05 for SD2.1 unCLIP, 0 for
  SDXL), its noise the next draw of the same generator (ComfyUI seeds torch's global generator per embedding and
  draws the merge's noise from it after the last one);
- SD2.1 unCLIP feeds the result to its class embedding (zeros without an image); SDXL ("revision") takes its
  first 1280 values as the pooled text embedding.

ComfyUI builds the augmentor with zero mean and unit deviation (its data statistics are never loaded), so the
normalisation around the noise is the identity and is left out here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch

MAX_NOISE_LEVEL = 1000
SEED_OFFSET = -10  # ComfyUI noises image embeddings from the sampling seed minus 10
SD21_MERGE_LEVEL = 0.05  # ComfyUI's default unclip_noise_augment_merge for SD2.1 unCLIP
SDXL_TIMESTEP_DIM = 1280  # SDXL's augmentor: the noise level embedded 1280 wide, the pooled slot 1280 wide
# SD2.1 unCLIP: ADM width = image embedding + its noise-level embedding of the same width (ComfyUI's
# supported_models.SD21UnclipL / SD21UnclipH: context 1024, ADM 1536 for ViT-L, 2048 for ViT-H).
SD21_UNCLIP_ADM = (1536, 2048)
SD21_UNCLIP_CONTEXT = 1024
VISUAL_PREFIX = "embedder.model."  # the image encoder inside an unCLIP checkpoint (OpenCLIP's `visual.*` below it)


@dataclass(frozen=True)
class UnclipImage:
    """One unCLIPConditioning's image embeddings [N, D] with its strength and noise augmentation."""

    embeds: torch.Tensor
    strength: float
    noise_augmentation: float


@lru_cache(maxsize=1)
def _noise_scales() -> tuple[torch.Tensor, torch.Tensor]:
    """sqrt(alpha_bar) and sqrt(1 - alpha_bar) per level of the squaredcos_cap_v2 schedule, float64 until the end
    as ComfyUI computes them (diffusers' betas_for_alpha_bar rounds the betas to float32 first)."""

    def alpha_bar(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    n = MAX_NOISE_LEVEL
    betas = torch.tensor(
        [min(1 - alpha_bar((i + 1) / n) / alpha_bar(i / n), 0.999) for i in range(n)], dtype=torch.float64
    )
    cumprod = torch.cumprod(1.0 - betas, dim=0)
    return cumprod.sqrt().float(), (1.0 - cumprod).sqrt().float()


def _augment(x: torch.Tensor, level: int, timestep_dim: int, gen: torch.Generator) -> torch.Tensor:
    """x [1, D] noised to `level`, joined to the level's embedding: [1, D + timestep_dim]."""
    # diffusers on first use: nodes.modelfns.denoise imports this module, and validation (which must not import
    # diffusers: tests/engine/test_model_file_validation.py) imports that
    from diffusers.models.embeddings import get_timestep_embedding

    signal, noise_scale = _noise_scales()
    noise = torch.randn(x.shape, dtype=x.dtype, generator=gen).to(x.device)
    z = signal[level].to(x.device) * x + noise_scale[level].to(x.device) * noise
    level_emb = get_timestep_embedding(
        torch.tensor([level], device=x.device), timestep_dim, flip_sin_to_cos=True, downscale_freq_shift=0
    )
    return torch.cat([z, level_emb.to(z.dtype)], dim=1)


def _level(noise_augmentation: float) -> int:
    return round((MAX_NOISE_LEVEL - 1) * noise_augmentation)


def unclip_adm(images: list[UnclipImage], timestep_dim: int, seed: int, merge: float) -> torch.Tensor:
    """The ADM vector [1, D + timestep_dim] of one conditioning entry's unCLIP images (see the module doc)."""
    gen = torch.Generator()
    outs = []
    for image in images:
        embeds = image.embeds.float()
        if embeds.dim() != 2 or embeds.shape[1] != timestep_dim:
            raise ValueError(
                f"unCLIPConditioning: this model takes {timestep_dim}-wide CLIP vision image embeddings, "
                f"got shape {tuple(embeds.shape)} (use the CLIP vision model the checkpoint was trained with)"
            )
        for row in embeds:
            gen.manual_seed(seed + SEED_OFFSET)
            outs.append(_augment(row[None], _level(image.noise_augmentation), timestep_dim, gen) * image.strength)
    if len(outs) == 1:
        return outs[0]
    total = torch.stack(outs).sum(0)
    return _augment(total[:, :timestep_dim], _level(merge), timestep_dim, gen)


def sdxl_pooled(images: list[UnclipImage], seed: int) -> torch.Tensor:
    """SDXL revision: the pooled slot of SDXL's ADM from the images (its merge level is 0)."""
    return unclip_adm(images, SDXL_TIMESTEP_DIM, seed, 0.0)[:, :SDXL_TIMESTEP_DIM]


def is_sd21_unclip(shapes: dict[str, tuple[int, ...]], prefix: str) -> bool:
    """A UNet with an ADM input that is SD2.1 unCLIP's: its checkpoint carries the image encoder, or (a bare
    UNet) it has ComfyUI's context and ADM widths for it; SDXL's ADM starts with a pooled text embedding."""
    if any(k.startswith(VISUAL_PREFIX + "visual.") for k in shapes):
        return True
    adm = shapes.get(f"{prefix}label_emb.0.0.weight")
    attn = next((v for k, v in shapes.items() if k.startswith(prefix) and k.endswith("attn2.to_k.weight")), None)
    return adm is not None and attn is not None and adm[1] in SD21_UNCLIP_ADM and attn[1] == SD21_UNCLIP_CONTEXT
