"""LTXVReferenceAudio's tokens (the ID-LoRA's reference voice) in the LTX-2 transformers: the tiny LTX-2.0 checkpoint
(nodes/models/ltx2.py, whose steps with reference audio run in ComfyUI's order: reference_forward) and the tiny
LTX-2.5 transformer (nodes/models/ltx25_transformer.py) equal the newest ComfyUI's LTXAVModel run on the same files at
development time (scripts/record_comfyui_ltxv_reference_audio.py; one sigma, image-to-video's kept first frame, a
batch of two sharing one reference)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader, ltx2_demo, ltx25_transformer_demo
from scripts.comfyui_recording import load_json, sha256
from scripts.record_comfyui_ltxv_reference_audio import cases
from tests.recorded_tensors import tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_ltxv_reference_audio.json")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("ltxv_reference_audio")
    ltx2 = tmp / "ltx2.safetensors"
    save_file(ltx2_demo.tiny_ltx2_state_dict(), str(ltx2), metadata=ltx2_demo.metadata())
    return {"ltx2": ltx2, "ltx25": ltx25_transformer_demo.build(tmp)}


@pytest.fixture(scope="module")
def models(files: dict[str, Path]) -> dict:
    return {k: loader.load_diffusion_model(make_ref("diffusion_model", "ltx2", [p])) for k, p in files.items()}


def inputs_of(case: dict) -> dict[str, torch.Tensor]:
    """The recorder's seeded inputs of a recorded case."""
    made = cases(case["context_width"], case["family"] == "ltx25")
    return next(c for c in made if c["name"] == case["case"])


def test_the_numbers_were_recorded_on_these_files(files: dict[str, Path]) -> None:
    assert {k: sha256(str(p)) for k, p in files.items()} == FIXTURE["file_sha256"]


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=[c["name"] for c in FIXTURE["cases"]])
def test_equal_to_the_newest_comfyuis_ltxav_model(models: dict, case: dict) -> None:
    torch.set_num_threads(1)
    model = models[case["family"]]
    inputs = inputs_of(case)
    extra = {"unprocessed": True} if case["family"] == "ltx25" else {}
    with torch.no_grad():
        video, audio = model.forward_av(
            inputs["video"],
            inputs["audio"],
            inputs["t_video"],
            inputs["t_audio"],
            inputs["context"],
            FIXTURE["frame_rate"],
            ref_audio=inputs["ref"],
            **extra,
        )
    assert (video - tensor(case["video_out"])).abs().max() < 1e-5
    assert (audio - tensor(case["audio_out"])).abs().max() < 1e-5


def test_the_reference_changes_the_prediction(models: dict) -> None:
    """Without the tokens the step is the plain one (diffusers' forward on LTX-2.0), and they do change it."""
    case = FIXTURE["cases"][0]
    inputs = inputs_of(case)
    args = (inputs["video"], inputs["audio"], inputs["t_video"], inputs["t_audio"], inputs["context"], 24.0)
    with torch.no_grad():
        plain = models["ltx2"].forward_av(*args)
        with_ref = models["ltx2"].forward_av(*args, ref_audio=inputs["ref"])
    assert plain[1].shape == with_ref[1].shape
    assert (plain[1] - with_ref[1]).abs().max() > 1e-3
