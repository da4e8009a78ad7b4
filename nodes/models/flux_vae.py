"""The Flux autoencoder (ae.safetensors): the ldm KL VAE with 16 latent channels and no quant convs.
Key conversion, config and ComfyUI's encode/decode conventions are the shared KL VAE's (nodes.models.vae);
latents stay raw, FLUX_LATENT shifts and scales them."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from diffusers import AutoencoderKL

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module
from nodes.models.vae import KLVAE, diffusers_config, is_diffusers_layout, ldm_to_diffusers


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> KLVAE:
    """The Flux VAE from bare encoder./decoder. keys (ae.safetensors), a `vae.`/`first_stage_model.`-prefixed
    checkpoint, or diffusers layout."""
    path = ref.sources[0] if ref.sources else None
    prefix = find_prefix(state_dict.keys(), "decoder.conv_in.weight")
    if prefix is None:
        raise ModelLoadError(path, "no VAE weights (decoder.conv_in.weight) in the file")
    sd = strip_prefix(state_dict, prefix)
    if not is_diffusers_layout(sd):
        sd = ldm_to_diffusers(sd, path)
    config = diffusers_config(sd, path)
    dtype = sd["decoder.conv_in.weight"].dtype
    module = build_module(lambda: AutoencoderKL(**config), sd, path, "VAE", dtype=dtype)
    return KLVAE(
        arch="flux",
        module=module,
        latent_channels=config["latent_channels"],
        downscale=2 ** (len(config["block_out_channels"]) - 1),
    )
