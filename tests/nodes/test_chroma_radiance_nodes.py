"""comfy_extras.nodes_chroma_radiance's classes and ComfyUI's pixel_space VAE (VAELoader's file-less option), as
ComfyUI 0.3.64 defines them: EmptyChromaRadianceLatentImage gives zeros [B,3,H,W] (comfy_extras/nodes_chroma_radiance
.py), the pixel_space VAE encodes IMAGE x to 2x-1 and decodes z to clamp((z+1)/2) (comfy/pixel_space_convert.py is the
identity; comfy/sd.py's VAE wraps it in process_input / process_output), ChromaRadianceOptions passes the model on
(its nerf_tile_size bounds memory only)."""

from __future__ import annotations

import asyncio

import pytest
import torch


def test_empty_latent_is_pixel_space_zeros() -> None:
    from nodes.library.chroma_radiance import EmptyChromaRadianceLatentImage

    (latent,) = EmptyChromaRadianceLatentImage().execute(width=48, height=32, batch_size=2)
    assert latent["samples"].shape == (2, 3, 32, 48) and not latent["samples"].any()


def test_pixel_space_vae_maps_images_to_minus_one_one_and_back(demo_workspace) -> None:
    from nodes.loaders import VAELoader
    from nodes.model_nodes import VAEDecode, VAEEncode

    assert "pixel_space" in VAELoader.INPUT_TYPES()["required"]["vae_name"][0]
    (vae,) = VAELoader().load_vae("pixel_space")
    image = torch.rand(1, 25, 41, 3, generator=torch.Generator().manual_seed(0))
    (latent,) = asyncio.run(VAEEncode().encode(vae, image))
    torch.testing.assert_close(latent["samples"], image.movedim(-1, 1) * 2 - 1, atol=1e-6, rtol=0)
    z = torch.linspace(-1.5, 1.5, 3 * 24 * 40).reshape(1, 3, 24, 40)
    (decoded,) = asyncio.run(VAEDecode().decode(vae, {"samples": z}))
    torch.testing.assert_close(decoded, torch.clamp((z + 1) / 2, 0, 1).movedim(1, -1), atol=1e-6, rtol=0)
    with pytest.raises(Exception, match="3-channel pixel latents"):
        asyncio.run(VAEDecode().decode(vae, {"samples": torch.zeros(1, 16, 4, 4)}))


def test_options_pass_the_model_and_refuse_bad_inputs(demo_workspace) -> None:
    from nodes.library.chroma_radiance import ChromaRadianceOptions
    from nodes.loaders import UNETLoader

    (model,) = UNETLoader().load_unet("chroma_tiny.safetensors", "default")
    (out,) = ChromaRadianceOptions().execute(model, True, 1.0, 0.0, 16)
    assert out == model
    with pytest.raises(ValueError, match="model input is invalid"):
        ChromaRadianceOptions().execute("not a model", True, 1.0, 0.0, -1)
    with pytest.raises(ValueError, match="nerf_tile_size"):
        ChromaRadianceOptions().execute(model, True, 1.0, 0.0, -2)
