"""FLUX.1 Fill: detected from its published sizes, its inpainting input (image latent + 64 mask channels) and one
evaluation equal to ComfyUI 0.10.0's (fixture from scripts/record_comfyui_flux_fill.py on the demo's tiny file)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.models.components import FLUX_LATENT
from nodes.models.flux import FluxDiffusionModel, infer_config, load_diffusion_model, to_diffusers_layout
from nodes.models.flux_demo import build_demo_flux
from nodes.models.flux_keys import diffusers_to_bfl
from nodes.models.safetensors_io import load_state_dict
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_flux_fill.json").read_text())
# black-forest-labs/flux, src/flux/util.py, configs["flux-dev-fill"] (repo_flow flux1-fill-dev.safetensors):
# FluxParams(in_channels=384, out_channels=64, hidden_size=3072, num_heads=24, depth=19, depth_single_blocks=38,
# axes_dim=[16, 56, 56], guidance_embed=True); img_in is Linear(in_channels, hidden_size) and the final layer's
# linear has out_channels rows. ComfyUI's model_detection divides img_in's width by the 2x2 patch: 96 channels,
# which comfy.supported_models.FluxInpaint matches.
PUBLISHED_FILL = {"img_in.weight": (3072, 384), "final_layer.linear.weight": (64, 3072)}


@pytest.fixture(scope="module")
def fill_model(tmp_path_factory):
    torch.set_num_threads(1)
    path = next(p for p in build_demo_flux(tmp_path_factory.mktemp("models")) if p.name == "flux-fill-tiny.safetensors")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["weights_sha256"]
    ref = ModelRef("diffusion_model", "flux", (str(path),), (file_digest(str(path)),))
    return load_diffusion_model(ref, load_state_dict(str(path)))


def test_the_published_fill_sizes_give_its_inpainting_input():
    from diffusers import FluxTransformer2DModel

    with torch.device("meta"):
        published = FluxTransformer2DModel(in_channels=384, out_channels=64, guidance_embeds=True)
    bfl = diffusers_to_bfl(published.state_dict())
    assert {k: tuple(bfl[k].shape) for k in PUBLISHED_FILL} == PUBLISHED_FILL
    config = infer_config(to_diffusers_layout(bfl))
    assert (config["in_channels"], config["out_channels"], config["axes_dims_rope"]) == (384, 64, (16, 56, 56))
    model = FluxDiffusionModel(
        arch="flux",
        module=torch.nn.Identity(),
        latent_format=FLUX_LATENT,
        sampling={},
        config=config,
        dtype=torch.float32,
    )
    x = torch.zeros(1, 16, 4, 6)
    assert model.concat_image(None, x).shape == (1, 80, 4, 6)  # 16 image + 64 mask channels
    dev = FluxDiffusionModel(
        arch="flux",
        module=torch.nn.Identity(),
        latent_format=FLUX_LATENT,
        sampling={},
        config=config | {"in_channels": 64},
    )
    assert dev.concat_image(None, x) is None


def test_the_demo_fill_file_is_in_bfls_layout(fill_model):
    assert fill_model.config["in_channels"] == 384 and fill_model.config["out_channels"] == 64


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["name"])
def test_fill_input_and_evaluation_equal_comfyuis(fill_model, case):
    x = tensor(case["x"])
    image = tensor(case["image"]) if "image" in case else None
    mask = tensor(case["mask"]) if "mask" in case else None
    concat = fill_model.concat_image(image, x, mask)
    assert torch.allclose(concat, tensor(case["concat"]), atol=1e-6, rtol=0)
    cond = {"context": tensor(case["context"]), "pooled": tensor(case["y"]), "guidance": case["guidance"]}
    sigma = case["sigma"]
    with torch.no_grad():
        out = fill_model.apply(x, torch.full((x.shape[0],), sigma), cond | {"concat": concat})
    assert torch.allclose(x - sigma * out, tensor(case["denoised"]), atol=1e-5, rtol=1e-5)
