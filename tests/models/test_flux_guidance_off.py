"""FluxDisableGuidance's model side: with the guidance embedding off, the demo Flux model's time vector is the
timestep's embedding plus the pooled text's, ComfyUI's Flux with guidance None (vec = time_in(t) +
vector_in(y)), exactly; the hook answers only the call it is switched on for."""

from __future__ import annotations

import torch

from nodes.models.flux import guidance_embedding_off


def test_time_vector_without_guidance(demo_workspace):
    from nodes.loaders import UNETLoader
    from nodes.models.loader import load_diffusion_model

    (ref,) = UNETLoader().load_unet("flux-tiny.safetensors", "default")
    module = load_diffusion_model(ref).module
    embed = module.time_text_embed
    t, g = torch.tensor([0.7]), torch.tensor([3.5])
    pooled = torch.linspace(-1.0, 1.0, module.config.pooled_projection_dim).reshape(1, -1)
    with torch.no_grad():
        with_guidance = embed(t, g, pooled)
        with guidance_embedding_off(module, True):
            off = embed(t, g, pooled)
        expected = embed.timestep_embedder(embed.time_proj(t).to(pooled.dtype)) + embed.text_embedder(pooled)
        after = embed(t, g, pooled)
    assert torch.equal(off, expected)
    assert not torch.equal(with_guidance, off)
    assert torch.equal(after, with_guidance)
