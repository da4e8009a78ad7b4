"""Kandinsky 5's image model (kandinsky5lite_t2i's layout: 2560 wide on 16 Flux latent channels) loaded as ComfyUI
0.10.0's supported_models.Kandinsky5Image: detected apart from the video models, Flux's latent format, flow sampling
at shift 3, no joined channels, 4-D latents; one step's prediction within 1e-5 of ComfyUI's on the same file
(scripts/record_comfyui_kandinsky5_image.py). The file is demo-models' kandinsky5lite_t2i_tiny (108 MB,
nodes/models/kandinsky5_demo.py), checked by its sha256; the image template's picture is
tests/e2e/test_kandinsky5_workflow.py's."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_kandinsky5_image.json.xz")


def recorded_inputs(seed: int = 5) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(2, 16, 6, 10, generator=g),
        "context": torch.randn(2, 5, 32, generator=g),
        "y": torch.randn(2, 32, generator=g),
    }


@pytest.fixture(scope="module")
def image_file(demo_workspace) -> Path:
    from nodes.models.kandinsky5_demo import T2I_FILE

    path = demo_workspace.models_dir / T2I_FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["file_sha256"], "not the recorded file"
    return path


def test_loads_and_predicts_as_comfyuis_image_model(image_file):
    from nodes.arch import has_frame_axis, is_video
    from nodes.loaders import make_ref
    from nodes.models.components import FLUX_LATENT
    from nodes.models.detect import probe
    from nodes.models.loader import load_diffusion_model
    from nodes.sampling.model_sampling import model_sampling_from_config

    torch.set_num_threads(1)
    assert probe(image_file).arch == "kandinsky5_image"
    assert (FIXTURE["model_class"], FIXTURE["latent_format"]) == ("Kandinsky5Image", "Flux")
    model = load_diffusion_model(make_ref("diffusion_model", "kandinsky5_image", [image_file]))
    assert model.arch == "kandinsky5_image" and model.latent_format == FLUX_LATENT
    assert (
        (model.sampling["shift"], model.sampling["multiplier"])
        == (FIXTURE["shift"], FIXTURE["multiplier"])
        == (
            3.0,
            1000.0,
        )
    )
    assert not has_frame_axis("kandinsky5_image") and not is_video("kandinsky5_image")
    assert FIXTURE["cond_keys"] == ["c_crossattn", "y"]  # no concat channels, no start latent
    data = recorded_inputs()
    for name, value in data.items():
        assert float(value.sum()) == pytest.approx(FIXTURE["input_sums"][name], abs=1e-4), name
    ms = model_sampling_from_config(model.sampling)
    cond = {"context": data["context"], "pooled": data["y"]}
    assert model.concat_image(None, data["x"], torch.ones(2, 1, 6, 10)) is None
    with torch.no_grad():
        for key, entry in FIXTURE["denoised"].items():
            sigma = torch.full((2,), float(key))
            out = model.apply(ms.calculate_input(sigma, data["x"]), ms.timestep(sigma), cond)
            denoised = ms.calculate_denoised(sigma, out, data["x"])
            torch.testing.assert_close(denoised, tensor(entry), atol=1e-5, rtol=0)
