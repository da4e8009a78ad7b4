"""`comfy.diffusers_convert`: diffusers / transformers key layouts -> the original (ldm, OpenCLIP) ones
packs save checkpoints in. The renames are our loaders' own (nodes.models.vae / clip), run backwards."""

from __future__ import annotations

import torch

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.models import clip, vae


def convert_vae_state_dict(vae_state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """AutoencoderKL keys -> ldm VAE keys (mid attention linears back to 1x1 convs)."""
    return vae.diffusers_to_ldm(vae_state_dict)


def convert_text_enc_state_dict_v20(
    text_enc_dict: dict[str, torch.Tensor], prefix: str = ""
) -> dict[str, torch.Tensor]:
    """HF CLIPTextModel keys (`<stem>transformer.text_model.*`, for the keys under `prefix`) -> OpenCLIP keys
    (`<stem>transformer.resblocks.*` with fused qkv, `<stem>ln_final.*`, ...), as SD2 / SDXL checkpoints
    hold them. Keys outside any text model (and position_ids) pass through unchanged."""
    stems = {
        k[: k.index("transformer.text_model.")]
        for k in text_enc_dict
        if k.startswith(prefix) and "transformer.text_model." in k
    }
    out: dict[str, torch.Tensor] = {}
    converted: set[str] = set()
    for stem in stems:
        hf = clip.hf_keys(text_enc_dict, stem + "transformer.")
        converted.update(stem + "transformer." + k for k in hf)
        converted.update(stem + "transformer.text_model." + k for k in hf)
        out.update({stem + k: v for k, v in clip.hf_to_open_clip(hf).items()})
    out.update({k: v for k, v in text_enc_dict.items() if k.startswith(prefix) and k not in converted})
    return out


def convert_text_enc_state_dict(text_enc_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """CLIP-L keeps transformers' names in ldm checkpoints: nothing to rename."""
    return text_enc_dict


def convert_unet_state_dict(unet_state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    raise UnsupportedFeature(
        "comfy.diffusers_convert.convert_unet_state_dict",
        "ComfyUI 0.3.64 no longer has it; UNets load in either layout through the loaders",
    )
