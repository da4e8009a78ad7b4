"""The FLUX.2 nodes of the newest ComfyUI's comfy_extras.nodes_flux: EmptyFlux2LatentImage's latent and
Flux2Scheduler's sigmas, the latter equal to what diffusers' Flux2 Klein pipeline samples at (its own
empirical mu and FlowMatchEulerDiscreteScheduler's exponential time shift)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import FlowMatchEulerDiscreteScheduler
from diffusers.pipelines.flux2.pipeline_flux2_klein import compute_empirical_mu

from nodes.library.flux2 import EmptyFlux2LatentImage, Flux2Scheduler, empirical_mu


def test_empty_latent_has_128_channels_at_one_sixteenth():
    (latent,) = EmptyFlux2LatentImage().execute(width=1024, height=768, batch_size=2)
    assert latent["samples"].shape == (2, 128, 48, 64) and not latent["samples"].any()
    assert latent["downscale_ratio_spacial"] == 16


@pytest.mark.parametrize("tokens,steps", [(16, 4), (4096, 4), (4096, 50), (4300, 20), (5000, 8), (6400, 1)])
def test_empirical_mu_equals_diffusers(tokens, steps):
    assert empirical_mu(tokens, steps) == compute_empirical_mu(tokens, steps)


@pytest.mark.parametrize("steps,width,height", [(4, 1024, 1024), (20, 1024, 1024), (4, 64, 64), (8, 1920, 1088)])
def test_scheduler_sigmas_equal_the_klein_pipelines(steps, width, height):
    (sigmas,) = Flux2Scheduler().execute(steps, width, height)
    assert sigmas.dtype == torch.float32 and sigmas.shape == (steps + 1,)
    scheduler = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True)
    scheduler.set_timesteps(
        sigmas=np.linspace(1.0, 1 / steps, steps).tolist(), mu=compute_empirical_mu(width * height // 256, steps)
    )
    assert sigmas[0] == 1.0 and sigmas[-1] == 0.0
    assert torch.allclose(sigmas, scheduler.sigmas.float(), atol=1e-6, rtol=0), (sigmas, scheduler.sigmas)


def test_cliploader_flux2_takes_klein_qwen3_and_names_clip_name_otherwise(demo_workspace):
    from nodes.loaders import CLIPLoader

    (clip,) = CLIPLoader().load_clip("flux2-klein-tiny-qwen3.safetensors", "flux2")
    assert clip.arch == "flux2" and clip.option("clip_type") == "flux2"
    (clip,) = CLIPLoader().load_clip("flux2-klein-tiny-qwen3.safetensors", "flux")  # ComfyUI: Klein's too
    assert clip.arch == "flux2"
    with pytest.raises(ValueError, match="clip_name: sd1-tiny-clip.safetensors .*type flux2 loads"):
        CLIPLoader().load_clip("sd1-tiny-clip.safetensors", "flux2")
