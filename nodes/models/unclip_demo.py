"""Tiny unCLIP files in the published layouts, for `demo-models`:

- sd21-unclip-tiny.safetensors: an SD2.1 unCLIP checkpoint as Stability ships it (ldm names): the SD2 UNet with its
  label embedding taking the image embedding and its noise-level embedding (2 x 32 wide here, 2 x 1024 in
  sd21-unclip-h), the OpenCLIP text tower under `cond_stage_model.model.`, the VAE under `first_stage_model.` and
  the OpenCLIP image tower under `embedder.model.visual.`;
- sdxl-revision-tiny.safetensors: the tiny SDXL layout of sdxl-tiny, but with SDXL's real 1280-wide pooled slot,
  which SDXL's unCLIP ("revision") conditioning fills with a CLIP ViT-bigG image embedding;
- clip_vision/clip-vision-g-tiny.safetensors: a two-layer CLIP vision tower in transformers' layout (as
  clip_vision_g.safetensors) with that 1280-wide projection.
"""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import UNet2DConditionModel

from . import clip as clip_mod
from . import clip_vision as cv_mod
from . import unet as unet_mod
from . import vae as vae_mod
from .demo import (
    SEED,
    _clip,
    _layout,
    _prefixed,
    _te_hf,
    _unet_ldm,
    _vae,
    save_tiny,
    tiny_clip_vision,
    tiny_sdxl_unet,
    tiny_unet,
)
from .unclip import SDXL_TIMESTEP_DIM

TEXT_WIDTH = 32
IMAGE_EMBED = 32  # sd21-unclip-tiny's image embedding width (ViT-H's is 1024)


def open_clip_visual(hf: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' CLIP vision names -> OpenCLIP's `visual.*` (the inverse of clip_vision.to_transformers_layout)."""
    inner = {k[len("vision_model.") :]: v for k, v in hf.items() if k.startswith("vision_model.")}
    renamed = {v: k for k, v in cv_mod._OPEN_CLIP_VISION.items()}
    out = {"proj": hf["visual_projection.weight"].t().contiguous()}
    out.update({renamed[k]: v for k, v in inner.items() if k in renamed})
    tower = {k: v for k, v in inner.items() if k.startswith("encoder.") or k == "embeddings.position_embedding.weight"}
    out.update(clip_mod.hf_to_open_clip(tower))
    return {"visual." + k: v for k, v in out.items()}


def _sd21_unet() -> UNet2DConditionModel:
    # Widths ComfyUI's own UNet takes too (32 norm groups, 64-wide heads), so its code runs on this file as reference
    return tiny_unet(
        "sd2",
        (32, 64),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=TEXT_WIDTH,
        use_linear_projection=True,
        class_embed_type="projection",
        projection_class_embeddings_input_dim=2 * IMAGE_EMBED,
    )


def _ldm_with_label(unet: UNet2DConditionModel) -> dict[str, torch.Tensor]:
    """The UNet's ldm names; its class embedding is ldm's label_emb (the shared writer knows SDXL's name for it)."""
    sd = {k.replace("class_embedding.", "add_embedding.", 1): v for k, v in unet.state_dict().items()}
    return unet_mod.diffusers_to_ldm(sd, _layout(unet))


def sd21_unclip_checkpoint() -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 40)
        unet, vae, te = _sd21_unet(), _vae(), _clip(TEXT_WIDTH, True, "gelu")
        vision = tiny_clip_vision(IMAGE_EMBED, SEED + 41)
        return {
            **_prefixed(_ldm_with_label(unet), unet_mod.LDM_UNET_PREFIX),
            **_prefixed(vae_mod.diffusers_to_ldm(vae.state_dict()), vae_mod.LDM_VAE_PREFIX),
            **_prefixed(clip_mod.hf_to_open_clip(te.state_dict()), "cond_stage_model.model."),
            **_prefixed(open_clip_visual(vision.state_dict()), cv_mod.UNCLIP_PREFIX),
        }


def sdxl_revision_checkpoint() -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 42)
        unet = tiny_sdxl_unet(32 + 48, SDXL_TIMESTEP_DIM)  # SDXL's real 1280-wide pooled slot
        vae = _vae()
        te1 = _clip(32, False, "quick_gelu")
        te2 = _clip(48, True, "gelu", projection_dim=SDXL_TIMESTEP_DIM)  # CLIP-G's 1280-wide pooled output
        return {
            **_prefixed(_unet_ldm(unet), unet_mod.LDM_UNET_PREFIX),
            **_prefixed(vae_mod.diffusers_to_ldm(vae.state_dict()), vae_mod.LDM_VAE_PREFIX),
            **_prefixed(_te_hf(te1), "conditioner.embedders.0.transformer."),
            **_prefixed(clip_mod.hf_to_open_clip(te2.state_dict()), "conditioner.embedders.1.model."),
        }


def clip_vision_g() -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        return tiny_clip_vision(SDXL_TIMESTEP_DIM, SEED + 43).state_dict()


def build_demo_unclip(models_dir: Path) -> list[Path]:
    models_dir = Path(models_dir)
    return [
        save_tiny(sd21_unclip_checkpoint(), models_dir / "checkpoints" / "sd21-unclip-tiny.safetensors"),
        save_tiny(sdxl_revision_checkpoint(), models_dir / "checkpoints" / "sdxl-revision-tiny.safetensors"),
        save_tiny(clip_vision_g(), models_dir / "clip_vision" / "clip-vision-g-tiny.safetensors"),
    ]
