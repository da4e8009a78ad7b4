"""VAE conventions (ComfyUI's), separate VAE files, and ControlNet residuals."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from nodes.models import vae as V
from nodes.models.loader import load_controlnet, load_diffusion_model, load_text_encoder, load_vae
from nodes.models.safetensors_io import load_state_dict

SD1, CN = "checkpoints/sd1-tiny.safetensors", "controlnet/sd1-tiny-controlnet.safetensors"


def test_vae_encode_decode_conventions(make_ref):
    vae = load_vae(make_ref("vae", SD1))
    pixels = torch.rand(2, 64, 48, 3)
    latent = vae.encode(pixels)
    assert latent.shape == (2, 4, 8, 6)
    with torch.no_grad():  # ComfyUI: 2x-1 in, the posterior's mode, no scaling
        ref = vae.module.encode(pixels.movedim(-1, 1) * 2 - 1).latent_dist.mean
    torch.testing.assert_close(latent, ref)
    image = vae.decode(latent)
    assert image.shape == (2, 64, 48, 3) and image.min() >= 0 and image.max() <= 1
    with torch.no_grad():
        raw = vae.module.decode(latent).sample
    torch.testing.assert_close(image, ((raw + 1) / 2).clamp(0, 1).movedim(1, -1))
    assert vae.encode(torch.rand(1, 70, 67, 3)).shape == (1, 4, 8, 8)  # centre-cropped to multiples of 8


def test_vae_files_in_ldm_and_diffusers_layout_equal_the_checkpoint(sd_models, tmp_path, make_ref):
    latent = torch.randn(1, 4, 8, 8)
    expected = load_vae(make_ref("vae", SD1)).decode(latent)
    assert torch.equal(load_vae(make_ref("vae", "vae/sd1-tiny-vae.safetensors")).decode(latent), expected)
    f = tmp_path / "diffusion_pytorch_model.safetensors"
    save_file(V.ldm_to_diffusers(load_state_dict(sd_models / "vae/sd1-tiny-vae.safetensors")), str(f))
    assert torch.equal(load_vae(make_ref("vae", str(f))).decode(latent), expected)


def test_controlnet_residuals_strength_and_hint_resizing(make_ref, fixed_threads):
    model = load_diffusion_model(make_ref("diffusion_model", SD1))
    cn = load_controlnet(make_ref("controlnet", CN))
    x, t, ctx = torch.randn(2, 4, 8, 8), torch.tensor([300.0]), torch.randn(1, 77, 32)
    hint = torch.rand(1, 50, 90, 3)  # another size and aspect: cropped and resized to 64x64
    full = cn.apply(x, t, {"context": ctx}, hint, 1.0)
    half = cn.apply(x, t, {"context": ctx}, hint, 0.5)
    assert len(full.down) == 4 and full.down[0].shape == (2, 32, 8, 8) and full.mid.shape == (2, 64, 4, 4)
    torch.testing.assert_close(half.mid, full.mid * 0.5)
    base = model.apply(x, t, {"context": ctx})
    zero = cn.apply(x, t, {"context": ctx}, hint, 0.0)
    assert torch.equal(model.apply(x, t, {"context": ctx, "control": zero}), base)
    assert (model.apply(x, t, {"context": ctx, "control": full}) - base).abs().max() > 1e-3
    chained = full + half
    torch.testing.assert_close(chained.mid, full.mid * 1.5)


@pytest.mark.parametrize(
    "hint, message",
    [
        (torch.rand(1, 64, 64, 5), "channels"),
        (torch.rand(1, 0, 64, 3), "pixels"),
        (torch.rand(3, 64, 64, 3), "batch"),
    ],
)
def test_controlnet_refuses_hints_that_cannot_match(make_ref, hint, message):
    cn = load_controlnet(make_ref("controlnet", CN))
    with pytest.raises(ValueError, match=message):
        cn.apply(torch.randn(2, 4, 8, 8), torch.tensor([300.0]), {"context": torch.randn(1, 77, 32)}, hint)


def test_sdxl_default_size_conditioning(make_ref):
    model = load_diffusion_model(make_ref("diffusion_model", "checkpoints/sdxl-tiny.safetensors"))
    te = load_text_encoder(make_ref("text_encoder", "checkpoints/sdxl-tiny.safetensors"))
    cond, pooled = te.encode(te.tokenize("a hill"))
    x, t = torch.randn(1, 4, 8, 6), torch.tensor([500.0])
    default = model.apply(x, t, {"context": cond, "pooled": pooled})
    explicit = torch.tensor([[64.0, 48.0, 0.0, 0.0, 64.0, 48.0]])
    assert torch.equal(model.apply(x, t, {"context": cond, "pooled": pooled, "time_ids": explicit}), default)
    other = torch.tensor([[1024.0, 1024.0, 0.0, 0.0, 1024.0, 1024.0]])
    assert not torch.equal(model.apply(x, t, {"context": cond, "pooled": pooled, "time_ids": other}), default)
