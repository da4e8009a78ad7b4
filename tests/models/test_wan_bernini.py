"""Bernini's in-context path checked against ComfyUI's own code on the tiny Bernini-R file and the tiny Wan 2.1 VAE.

tests/models/fixtures/comfyui_bernini.json.xz was recorded by scripts/record_comfyui_bernini.py: the newest ComfyUI's
WanModel with context_latents, WAN21.extra_conds and BerniniConditioning (run at development time on ComfyUI 0.10.0's
comfy package, never committed) on the files nodes.models.wan_demo writes."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.library.bernini import BerniniConditioning, long_edge_resize
from nodes.loaders import make_ref
from nodes.models import loader, wan_bernini
from nodes.models.detect import probe
from nodes.models.wan import WanDiffusionModel
from nodes.models.wan_demo import FILES, bernini_models, tiny_wan_state_dicts
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_bernini.json.xz")
ATOL, RTOL = 1e-5, 1e-4
VAE_ATOL = 1e-5  # two VAE implementations' encodes of the same frames (float32)


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bernini") / FILES["bernini_high"]
    out.parent.mkdir(parents=True)
    save_file(bernini_models()["bernini_high"], out, metadata={"format": "pt"})
    return out


@pytest.fixture(scope="module")
def model(path) -> WanDiffusionModel:
    return loader.load_diffusion_model(make_ref("diffusion_model", probe(path).arch, [path]))


@pytest.fixture(scope="module")
def vae(tmp_path_factory):
    path = tmp_path_factory.mktemp("bernini_vae") / FILES["vae"]
    path.parent.mkdir(parents=True)
    save_file(tiny_wan_state_dicts()["vae"], path, metadata={"format": "pt"})
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["sha256"][FILES["vae"]], "re-record"
    return make_ref("vae", "qwen_image", [path])


def test_tiny_file_is_the_recorded_one(path, model) -> None:
    assert FIXTURE["file"] == FILES["bernini_high"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["sha256"][FILES["bernini_high"]], "re-record"
    assert type(model) is WanDiffusionModel and model.config["in_channels"] == 16  # a plain text-to-video Wan


def _streams(inputs: dict, case: str) -> list[torch.Tensor]:
    return [inputs[s] for s in FIXTURE["cases"][case]["streams"]]


@pytest.mark.parametrize("case", list(FIXTURE["cases"]))
def test_network_equals_comfyui(model, case: str) -> None:
    torch.set_num_threads(1)
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    cond = {"context": inputs["context"], "context_latents": _streams(inputs, case)}
    with torch.no_grad():  # through the model's step entry: the plain path without streams
        out = model.apply(inputs["x"], inputs["timestep"], cond)
    torch.testing.assert_close(out, tensor(FIXTURE["cases"][case]["out"]), atol=ATOL, rtol=RTOL)


def test_streams_are_told_apart_by_their_number(model) -> None:
    """Two streams swapped give another output: each is turned by its own number, not only by its grid."""
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    same = inputs["source"][:, :, :1, :5, :4]
    other = same.flip(-1)
    with torch.no_grad():
        a = wan_bernini.forward(model.module, inputs["x"], inputs["timestep"], inputs["context"], None, [same, other])
        b = wan_bernini.forward(model.module, inputs["x"], inputs["timestep"], inputs["context"], None, [other, same])
    assert (a - b).abs().max() > 1e-4


def test_step_inputs_are_comfyuis_extra_conds(model) -> None:
    rec = FIXTURE["extra_conds"]
    for latent, expected in zip(rec["latents"], rec["conds"], strict=True):
        torch.testing.assert_close(model.latent_format.process_in(tensor(latent)), tensor(expected), atol=1e-6, rtol=0)


@pytest.mark.parametrize("case", list(FIXTURE["nodes"]["cases"]))
def test_bernini_conditioning_equals_comfyui(vae, case: str) -> None:
    torch.set_num_threads(1)
    rec = FIXTURE["nodes"]["cases"][case]
    images = {k: tensor(v) for k, v in FIXTURE["nodes"]["images"].items()}
    kwargs = {}
    for key, value in rec["case"].items():
        if key == "reference_images":  # the web UI's dotted autogrow names
            kwargs.update({f"reference_images.{n}": images[n] for n in ("reference_image_1", "reference_image_0")})
        else:
            kwargs[key] = images[key] if value is True else value
    cond = [[torch.zeros(1, 4, 8), {}]]
    pos, neg, latent = asyncio.run(BerniniConditioning().execute(cond, cond, vae, **kwargs))
    for ours, theirs in ((pos, rec["positive"]), (neg, rec["negative"])):
        assert len(ours) == len(theirs)
        for (_, opts), expected in zip(ours, theirs, strict=True):
            assert sorted(opts) == sorted(expected)
            streams = opts.get("context_latents", [])
            assert len(streams) == len(expected.get("context_latents", []))
            for a, b in zip(streams, expected.get("context_latents", []), strict=True):
                torch.testing.assert_close(a, tensor(b), atol=VAE_ATOL, rtol=0)
    torch.testing.assert_close(latent["samples"], tensor(rec["latent"]["samples"]), atol=0, rtol=0)


def test_long_edge_resize_keeps_aspect_on_16_pixel_steps() -> None:
    assert long_edge_resize(torch.rand(1, 50, 30, 3), 32).shape == (1, 32, 16, 3)
    assert long_edge_resize(torch.rand(1, 20, 36, 4), 848).shape == (1, 16, 32, 3)  # never up, alpha dropped
    assert long_edge_resize(torch.rand(1, 5, 5, 3), 848).shape == (1, 16, 16, 3)  # at least one step


def test_refused_on_a_model_it_cannot_feed(model) -> None:
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    cond = {"context": inputs["context"], "context_latents": [torch.zeros(2, 48, 1, 4, 4)]}
    with pytest.raises(ValueError, match="16-channel"):
        model.apply(inputs["x"], inputs["timestep"], cond)
