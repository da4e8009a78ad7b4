"""Detection from key names and configs inferred from tensor shapes, on the demo files and a pruned UNet."""

from __future__ import annotations

import pytest
import torch
from diffusers import UNet2DConditionModel
from diffusers.loaders.single_file_utils import convert_ldm_unet_checkpoint, convert_ldm_vae_checkpoint
from safetensors.torch import save_file

from nodes.models import unet as U
from nodes.models import vae as V
from nodes.models.loader import load_diffusion_model, probe
from nodes.models.safetensors_io import load_state_dict


@pytest.mark.parametrize(
    "name, arch, kind, components",
    [
        ("checkpoints/sd1-tiny.safetensors", "sd1", "checkpoint", {"diffusion_model", "vae", "text_encoder"}),
        ("checkpoints/sdxl-tiny.safetensors", "sdxl", "checkpoint", {"diffusion_model", "vae", "text_encoder"}),
        ("vae/sd1-tiny-vae.safetensors", "sd1", "vae", {"vae"}),
        ("text_encoders/sd1-tiny-clip.safetensors", "clip", "text_encoder", {"text_encoder"}),
        ("loras/sd1-tiny-lora.safetensors", "sd1", "lora", set()),
        ("controlnet/sd1-tiny-controlnet.safetensors", "sd1", "controlnet", {"controlnet"}),
    ],
)
def test_probe_names_architecture_and_components(sd_models, name, arch, kind, components):
    info = probe(sd_models / name)
    assert (info.arch, info.kind, set(info.components)) == (arch, kind, components)


def test_flux_and_sd3_keys_are_recognised(tmp_path):
    for marker, arch in (
        ("double_blocks.0.img_attn.qkv.weight", "flux"),
        ("joint_blocks.0.context_block.attn.qkv.weight", "sd3"),
    ):
        f = tmp_path / f"{arch}.safetensors"
        save_file({"model.diffusion_model." + marker: torch.zeros(2, 2)}, str(f))
        assert probe(f).arch == arch


def _unet_part(path):
    sd = load_state_dict(path)
    return {k[len(U.LDM_UNET_PREFIX) :]: v for k, v in sd.items() if k.startswith(U.LDM_UNET_PREFIX)}


@pytest.mark.parametrize(
    "name, arch", [("checkpoints/sd1-tiny.safetensors", "sd1"), ("checkpoints/sdxl-tiny.safetensors", "sdxl")]
)
def test_inferred_config_and_keys_match_diffusers_own_converter(sd_models, name, arch):
    sd = load_state_dict(sd_models / name)
    part = _unet_part(sd_models / name)
    layout = U.infer_layout({k: tuple(v.shape) for k, v in part.items()})
    cfg = U.diffusers_config(layout, arch)
    assert cfg["block_out_channels"] == (32, 64) and cfg["layers_per_block"] == (1, 1)
    if arch == "sdxl":
        assert cfg["transformer_layers_per_block"] == (1, 2) and cfg["use_linear_projection"]
        assert cfg["cross_attention_dim"] == 80 and cfg["projection_class_embeddings_input_dim"] == 6 * 256 + 32
    else:
        assert cfg["down_block_types"] == ("CrossAttnDownBlock2D", "DownBlock2D") and cfg["cross_attention_dim"] == 32
    theirs = convert_ldm_unet_checkpoint(dict(sd), {**cfg, "layers_per_block": 1})
    ours = U.ldm_to_diffusers(part, layout)
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert U.diffusers_to_ldm(ours, layout).keys() == part.keys()


def test_vae_keys_match_diffusers_own_converter(sd_models):
    sd = load_state_dict(sd_models / "checkpoints/sd1-tiny.safetensors")
    part = {k[len(V.LDM_VAE_PREFIX) :]: v for k, v in sd.items() if k.startswith(V.LDM_VAE_PREFIX)}
    ours = V.ldm_to_diffusers(part)
    cfg = V.diffusers_config(ours)
    assert cfg["block_out_channels"] == (8, 16, 32, 32) and cfg["latent_channels"] == 4
    theirs = convert_ldm_vae_checkpoint(dict(sd), cfg)
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert V.diffusers_to_ldm(ours).keys() == part.keys()


def test_pruned_unet_with_fewer_blocks_loads_and_matches_its_source(tmp_path, make_ref, fixed_threads):
    """BK-SDM style: one resnet per level and no middle block; three levels."""
    torch.manual_seed(3)
    src = UNet2DConditionModel(
        sample_size=8,
        block_out_channels=(32, 32, 64),
        layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        mid_block_type=None,
        cross_attention_dim=32,
        attention_head_dim=8,
    ).eval()
    layout = U.UNetLayout(4, 4, 128, [32, 32, 64], [[1], [1], [0]], [[1, 1], [1, 1], [0, 0]], None, 32, False, None)
    ldm = U.diffusers_to_ldm(src.state_dict(), layout)
    f = tmp_path / "pruned.safetensors"
    save_file({k: v.contiguous() for k, v in ldm.items()}, str(f))  # a bare UNet: no prefix
    info = probe(f)
    assert (info.arch, info.kind) == ("sd1", "diffusion_model")
    model = load_diffusion_model(make_ref("diffusion_model", str(f)))
    assert model.module.config.mid_block_type is None
    assert tuple(model.module.config.block_out_channels) == (32, 32, 64)
    x, ctx = torch.randn(1, 4, 16, 16), torch.randn(1, 5, 32)
    with torch.no_grad():
        expected = src(x, torch.tensor([10.0]), encoder_hidden_states=ctx).sample
    assert torch.equal(model.apply(x, torch.tensor([10.0]), {"context": ctx}), expected)
