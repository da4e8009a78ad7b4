"""A tiny GLIGEN text-box model in the published file's layout (gligen_sd14_textbox_pruned: a `fuser` under every
transformer block's ldm name, `position_net.*` beside them), with the tiny SD1 checkpoint it is made for, for
`demo-models`.

GLIGEN's box texts are the CLIP's pooled outputs and its object tokens are as wide (768 for SD1.4; ComfyUI pads the
unused boxes to the object width, so it needs them equal), and ComfyUI gives the layers 64-wide heads unless that
width is 768. So the pair is sized for it: sd1-gligen-tiny is an SD1 checkpoint in the ldm layout whose CLIP and
context are 64 wide and whose UNet levels are 64 and 128 wide, and gligen-sd1-tiny's layers fit its blocks. The
gates (alpha_attn, alpha_dense) are drawn non-zero, so the layers change the image as a trained model's do."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import UNet2DConditionModel
from diffusers.models.attention import GatedSelfAttentionDense
from diffusers.models.embeddings import GLIGENTextBoundingboxProjection

from . import unet as unet_mod
from . import vae as vae_mod
from .demo import SEED, _clip, _prefixed, _randomize, _te_hf, _unet_ldm, _vae, save_tiny, tiny_unet

WIDTH = 64  # CLIP, context, box texts and object tokens


def _unet() -> UNet2DConditionModel:
    return tiny_unet(
        "sd1",
        (64, 128),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=WIDTH,
    )


def sd1_gligen_files() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(the SD1 checkpoint's tensors, the GLIGEN file's tensors)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 50)
        unet, vae, te = _unet(), _vae(), _clip(WIDTH, False, "quick_gelu")
        ldm = _unet_ldm(unet)
        checkpoint = {
            **_prefixed(ldm, unet_mod.LDM_UNET_PREFIX),
            **_prefixed(vae_mod.diffusers_to_ldm(vae.state_dict()), vae_mod.LDM_VAE_PREFIX),
            **_prefixed(_te_hf(te), "cond_stage_model.transformer."),
        }
        gen = torch.Generator().manual_seed(SEED + 51)
        gligen: dict[str, torch.Tensor] = {}
        for key, norm in sorted(ldm.items()):
            if not key.endswith(".transformer_blocks.0.norm1.weight"):
                continue
            query = norm.shape[0]
            fuser = GatedSelfAttentionDense(query, WIDTH, query // 64, 64)  # ComfyUI's heads for a non-768 width
            _randomize([fuser.alpha_attn, fuser.alpha_dense], gen, 1.0)
            prefix = key[: -len("norm1.weight")] + "fuser."
            gligen.update({prefix + k: v for k, v in fuser.state_dict().items()})
        net = GLIGENTextBoundingboxProjection(WIDTH, WIDTH)
        _randomize([net.null_positive_feature, net.null_position_feature], gen, 1.0)
        gligen.update({"position_net." + k: v for k, v in net.state_dict().items()})
        return checkpoint, gligen


def build_demo_gligen(models_dir: Path) -> list[Path]:
    checkpoint, gligen = sd1_gligen_files()
    models_dir = Path(models_dir)
    return [
        save_tiny(checkpoint, models_dir / "checkpoints" / "sd1-gligen-tiny.safetensors"),
        save_tiny(gligen, models_dir / "gligen" / "gligen-sd1-tiny.safetensors"),
    ]
