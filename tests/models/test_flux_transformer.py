"""The Flux DiffusionModel: config from shapes, and `apply` equal to diffusers' Flux on the same inputs."""

from __future__ import annotations

import pytest
import torch
from diffusers import FluxPipeline, FluxTransformer2DModel

from cluster.refs import ModelRef
from nodes.models.components import FLUX_LATENT
from nodes.models.errors import ModelLoadError
from nodes.models.flux import infer_config, load_diffusion_model
from nodes.models.flux_keys import diffusers_to_bfl

REF = ModelRef("diffusion_model", "flux", (), ())


def _model(seed: int = 0, **kw) -> FluxTransformer2DModel:
    torch.manual_seed(seed)
    cfg = dict(
        patch_size=1,
        in_channels=64,
        num_layers=1,
        num_single_layers=2,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        guidance_embeds=True,
        axes_dims_rope=(4, 4, 8),
    )
    cfg.update(kw)
    m = FluxTransformer2DModel(**cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    return m


def _bfl_file(m: FluxTransformer2DModel) -> dict[str, torch.Tensor]:
    return {"model.diffusion_model." + k: v for k, v in diffusers_to_bfl(m.state_dict()).items()}


def test_apply_equals_diffusers_on_packed_input():
    torch.set_num_threads(1)
    m = _model()
    dm = load_diffusion_model(REF, _bfl_file(m), axes_dim=(4, 4, 8))
    assert dm.arch == "flux" and dm.latent_format == FLUX_LATENT
    assert dm.sampling == {"kind": "flux", "shift": 1.15}
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 16, 8, 12, generator=gen)
    ctx, pooled = torch.randn(2, 5, 32, generator=gen), torch.randn(2, 32, generator=gen)
    sigma = torch.tensor([0.8, 0.3])
    out = dm.apply(x, sigma, {"context": ctx, "pooled": pooled, "guidance": torch.tensor([3.5, 2.0])})

    with torch.no_grad():
        ref = m(
            hidden_states=FluxPipeline._pack_latents(x, 2, 16, 8, 12),
            encoder_hidden_states=ctx,
            pooled_projections=pooled,
            timestep=sigma,
            img_ids=FluxPipeline._prepare_latent_image_ids(2, 4, 6, "cpu", torch.float32),
            txt_ids=torch.zeros(5, 3),
            guidance=torch.tensor([3.5, 2.0]),
            return_dict=False,
        )[0]
    expected = FluxPipeline._unpack_latents(ref, 64, 96, 8)
    assert out.shape == x.shape
    # Ours multiplies the [batch, features] projections row by row (batch invariance), diffusers in one
    # GEMM: a few float32 ulps apart.
    assert torch.allclose(out, expected, atol=5e-6, rtol=0), (out - expected).abs().max()


def test_guidance_defaults_to_comfyui_value_and_changes_output():
    dm = load_diffusion_model(REF, _bfl_file(_model()), axes_dim=(4, 4, 8))
    x, ctx = torch.randn(1, 16, 4, 4), torch.randn(1, 3, 32)
    base = {"context": ctx, "pooled": torch.zeros(1, 32)}
    default = dm.apply(x, torch.tensor([0.5]), base)
    assert torch.equal(default, dm.apply(x, torch.tensor([0.5]), {**base, "guidance": 3.5}))
    assert not torch.equal(default, dm.apply(x, torch.tensor([0.5]), {**base, "guidance": 1.0}))


def test_odd_latent_sizes_are_padded_and_cropped_back():
    dm = load_diffusion_model(REF, _bfl_file(_model()), axes_dim=(4, 4, 8))
    x = torch.randn(1, 16, 5, 7)
    out = dm.apply(x, torch.tensor([0.5]), {"context": torch.randn(1, 3, 32), "pooled": torch.zeros(1, 32)})
    assert out.shape == x.shape and torch.isfinite(out).all()


def test_config_inferred_for_other_block_counts_and_schnell():
    m = _model(
        num_layers=2,
        num_single_layers=3,
        attention_head_dim=8,
        num_attention_heads=4,
        joint_attention_dim=24,
        pooled_projection_dim=20,
        guidance_embeds=False,
        axes_dims_rope=(2, 2, 4),
    )
    dm = load_diffusion_model(REF, _bfl_file(m), axes_dim=(2, 2, 4))
    for k in (
        "num_layers",
        "num_single_layers",
        "attention_head_dim",
        "num_attention_heads",
        "joint_attention_dim",
        "pooled_projection_dim",
        "guidance_embeds",
    ):
        assert dm.config[k] == m.config[k], k
    assert dm.sampling == {"kind": "flow", "shift": 1.0, "multiplier": 1.0}
    x = torch.randn(1, 16, 4, 4)
    out = dm.apply(x, torch.tensor([0.5]), {"context": torch.randn(1, 3, 24), "pooled": torch.randn(1, 20)})
    assert out.shape == x.shape


def test_real_flux_shapes_get_bfl_rope_axes():
    # Shapes only (meta tensors): Flux.1-dev's 3072-wide transformer with 128-wide heads.
    meta = lambda *s: torch.empty(*s, device="meta")
    h = 3072
    sd = {
        "x_embedder.weight": meta(h, 64),
        "proj_out.weight": meta(64, h),
        "context_embedder.weight": meta(h, 4096),
        "time_text_embed.text_embedder.linear_1.weight": meta(h, 768),
        "time_text_embed.guidance_embedder.linear_1.weight": meta(h, 256),
        "transformer_blocks.0.attn.norm_k.weight": meta(128),
        "transformer_blocks.0.ff.net.0.proj.weight": meta(4 * h, h),
        "single_transformer_blocks.0.proj_mlp.weight": meta(4 * h, h),
    }
    cfg = infer_config(sd)
    assert cfg["num_attention_heads"] == 24 and cfg["axes_dims_rope"] == (16, 56, 56)
    assert cfg["num_layers"] == 1 and cfg["num_single_layers"] == 1 and cfg["guidance_embeds"]


def test_unknown_head_dim_without_config_is_a_clear_error():
    with pytest.raises(ModelLoadError, match="RoPE axes"):
        load_diffusion_model(REF, _bfl_file(_model()))
