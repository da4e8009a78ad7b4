"""FLUX.1 Canny / Depth dev: detected from their published sizes, their input (the latent joined by the control
image's latent) and one evaluation equal to ComfyUI 0.3.64's (fixture from scripts/record_comfyui_flux_canny.py
on the demo's tiny file); templates_render maps the template's file to it."""

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
from scripts import templates_render
from tests.recorded_tensors import at_recorded, tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_flux_canny.json").read_text())
# black-forest-labs/flux, src/flux/util.py, configs["flux-dev-canny"] and ["flux-dev-depth"] (flux1-canny-dev /
# flux1-depth-dev.safetensors): FluxParams(in_channels=128, out_channels=64, hidden_size=3072, ...,
# guidance_embed=True); img_in is Linear(in_channels, hidden_size). ComfyUI's model_detection divides img_in's
# width by the 2x2 patch: 32 channels, twice out_channels, so model_base.Flux.concat_cond gives the image alone.
PUBLISHED_CANNY = {"img_in.weight": (3072, 128), "final_layer.linear.weight": (64, 3072)}


@pytest.fixture(scope="module")
def canny_model(tmp_path_factory):
    torch.set_num_threads(1)
    built = build_demo_flux(tmp_path_factory.mktemp("models"))
    path = next(p for p in built if p.name == "flux-canny-tiny.safetensors")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["weights_sha256"]
    ref = ModelRef("diffusion_model", "flux", (str(path),), (file_digest(str(path)),))
    return load_diffusion_model(ref, load_state_dict(str(path)))


def test_the_published_canny_sizes_take_the_control_latent_alone():
    from diffusers import FluxTransformer2DModel

    with torch.device("meta"):
        published = FluxTransformer2DModel(in_channels=128, out_channels=64, guidance_embeds=True)
    bfl = diffusers_to_bfl(published.state_dict())
    assert {k: tuple(bfl[k].shape) for k in PUBLISHED_CANNY} == PUBLISHED_CANNY
    config = infer_config(to_diffusers_layout(bfl))
    assert (config["in_channels"], config["out_channels"]) == (128, 64)
    model = FluxDiffusionModel(
        arch="flux", module=torch.nn.Identity(), latent_format=FLUX_LATENT, sampling={}, config=config
    )
    x = torch.zeros(1, 16, 4, 6)
    assert model.concat_image(None, x).shape == (1, 16, 4, 6)  # no mask channels, unlike Fill


def test_the_template_files_map_to_the_tiny_canny_flux():
    asked = ["flux1-canny-dev.safetensors", "ae.safetensors", "clip_l.safetensors", "t5xxl_fp16.safetensors"]
    assert [templates_render.demo_file(n, asked) for n in asked] == [
        "flux-canny-tiny.safetensors",
        "flux-tiny-ae.safetensors",
        "flux-tiny-clip_l.safetensors",
        "flux-tiny-t5.safetensors",
    ]
    assert templates_render.demo_file("flux1-depth-dev.safetensors", asked) == "flux-canny-tiny.safetensors"


def test_the_demo_canny_file_is_in_bfls_layout(canny_model):
    assert canny_model.config["in_channels"] == 128 and canny_model.config["out_channels"] == 64


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["name"])
def test_canny_input_and_evaluation_equal_comfyuis(canny_model, case):
    x = tensor(case["x"])
    image = tensor(case["image"]) if "image" in case else None
    concat = canny_model.concat_image(image, x)
    assert torch.allclose(at_recorded(concat, case["concat"]), tensor(case["concat"]), atol=1e-6, rtol=0)
    cond = {"context": tensor(case["context"]), "pooled": tensor(case["y"]), "guidance": case["guidance"]}
    sigma = case["sigma"]
    with torch.no_grad():
        out = canny_model.apply(x, torch.full((x.shape[0],), sigma), cond | {"concat": concat})
    denoised = at_recorded(x - sigma * out, case["denoised"])
    assert torch.allclose(denoised, tensor(case["denoised"]), atol=1e-5, rtol=1e-5)
