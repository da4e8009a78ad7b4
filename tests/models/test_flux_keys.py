"""Flux key layouts: BFL/ComfyUI <-> diffusers conversion is exact and reads every size from the shapes."""

from __future__ import annotations

import pytest
import torch
from diffusers import FluxTransformer2DModel

from nodes.models.flux import is_flux_state_dict, to_diffusers_layout
from nodes.models.flux_keys import bfl_to_diffusers, diffusers_to_bfl


def _diffusers_sd(**kw) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
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
    sd = FluxTransformer2DModel(**cfg).state_dict()
    # Make every tensor distinct so that a swapped key cannot go unnoticed.
    return {k: torch.randn(v.shape) for k, v in sd.items()}


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {
            "num_layers": 2,
            "num_single_layers": 1,
            "attention_head_dim": 8,
            "num_attention_heads": 6,
            "axes_dims_rope": (2, 2, 4),
            "guidance_embeds": False,
        },
    ],
)
def test_diffusers_to_bfl_and_back_is_bit_exact(kw):
    sd = _diffusers_sd(**kw)
    back = bfl_to_diffusers(diffusers_to_bfl(sd))
    assert set(back) == set(sd)
    for k in sd:
        assert torch.equal(back[k], sd[k]), k


def test_bfl_to_diffusers_and_back_is_bit_exact():
    bfl = diffusers_to_bfl(_diffusers_sd())
    back = diffusers_to_bfl(bfl_to_diffusers(bfl))
    assert set(back) == set(bfl)
    assert all(torch.equal(back[k], bfl[k]) for k in bfl)


def test_bfl_layout_has_fused_projections_and_swapped_final_modulation():
    sd = _diffusers_sd()
    bfl = diffusers_to_bfl(sd)
    hidden = 32
    assert bfl["double_blocks.0.img_attn.qkv.weight"].shape == (3 * hidden, hidden)
    assert bfl["single_blocks.1.linear1.weight"].shape == (3 * hidden + 4 * hidden, hidden)
    assert torch.equal(
        bfl["double_blocks.0.txt_attn.qkv.weight"][hidden : 2 * hidden],
        sd["transformer_blocks.0.attn.add_k_proj.weight"],
    )
    shift_scale = bfl["final_layer.adaLN_modulation.1.weight"]
    scale, shift = sd["norm_out.linear.weight"].chunk(2)
    assert torch.equal(shift_scale[:hidden], shift) and torch.equal(shift_scale[hidden:], scale)


def test_detection_and_prefixes():
    sd = _diffusers_sd()
    bfl = diffusers_to_bfl(sd)
    prefixed = {"model.diffusion_model." + k: v for k, v in bfl.items()}
    prefixed["vae.decoder.conv_in.weight"] = torch.zeros(1)
    assert is_flux_state_dict(bfl) and is_flux_state_dict(prefixed) and is_flux_state_dict(sd)
    assert not is_flux_state_dict(["model.diffusion_model.input_blocks.0.0.weight", "x_embedder.weight"])
    assert set(to_diffusers_layout(prefixed)) == set(sd)


def test_unknown_bfl_weights_are_refused():
    bfl = diffusers_to_bfl(_diffusers_sd())
    bfl["double_blocks.0.img_attn.extra.weight"] = torch.zeros(2)
    with pytest.raises(ValueError, match="unsupported Flux weights"):
        bfl_to_diffusers(bfl)
