"""Wan HuMo (issue 39) checked against ComfyUI 0.3.64 on the tiny files (nodes/models/wan_humo_demo.py): the Whisper
encoder's last state and 33 hidden states (16 kHz stereo, 22.05 kHz mono resampled, a batch of two), the audio
windows and reference latents WanHuMoImageToVideo gives, and the HuMo 17B and 1.7B models' denoised output (audio and
reference, audio alone, zero audio, a batch of two) equal ComfyUI's within 1e-5
(tests/models/fixtures/comfyui_wan_humo.json.xz, recorded by scripts/record_comfyui_wan_humo.py)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.wan_humo_demo import FILES, build_demo_wan_humo
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_humo.json")
ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    torch.set_num_threads(1)
    yield from active_workspace(tmp_path_factory.mktemp("humo-ws"), build_demo_wan_humo)


def test_the_files_are_the_recorded_ones(workspace) -> None:
    for name, rec in FIXTURE["files"].items():
        path = workspace.models_dir / FILES[name]
        assert rec["path"] == FILES[name] and hashlib.sha256(path.read_bytes()).hexdigest() == rec["sha256"], name


def _waveform(rec: dict) -> torch.Tensor:
    """The recorded case's seeded waveform, drawn as the recorder drew it."""
    noise = torch.randn(*rec["shape"], generator=torch.Generator().manual_seed(rec["seed"]))
    return noise * torch.tensor(rec["scales"]).view(-1, 1, 1)


def _encode(waveform: torch.Tensor, rate: int):
    (encoder,) = asyncio.run(call_node("AudioEncoderLoader", audio_encoder_name=Path(FILES["whisper"]).name))
    assert encoder.arch == "whisper3"
    (out,) = asyncio.run(
        call_node("AudioEncoderEncode", audio_encoder=encoder, audio={"waveform": waveform, "sample_rate": rate})
    )
    return out


@pytest.mark.parametrize("case", sorted(FIXTURE["audio_encoder"]))
def test_the_whisper_encoder_equals_comfyuis(workspace, case) -> None:
    rec = FIXTURE["audio_encoder"][case]
    out = _encode(_waveform(rec), rec["sample_rate"])
    assert out["audio_samples"] == rec["audio_samples"]
    layers = torch.stack(out["encoded_audio_all_layers"])
    assert layers.shape[0] == 33
    torch.testing.assert_close(
        at_recorded(out["encoded_audio"], rec["encoded"]), tensor(rec["encoded"]), atol=ATOL, rtol=RTOL
    )
    torch.testing.assert_close(at_recorded(layers, rec["all_layers"]), tensor(rec["all_layers"]), atol=ATOL, rtol=RTOL)


def _node(**inputs):
    text = [[torch.zeros(1, 4, 32), {}]]
    return asyncio.run(call_node("WanHuMoImageToVideo", positive=text, negative=text, vae=None, **inputs))


@pytest.mark.parametrize("case", ["audio_13", "audio_21"])
def test_the_nodes_audio_windows_equal_comfyuis(workspace, case) -> None:
    stereo = FIXTURE["audio_encoder"]["stereo_16k"]
    rec = FIXTURE["nodes"][case]
    pos, neg, latent = _node(audio_encoder_output=_encode(_waveform(stereo), 16000), **rec["inputs"])
    assert list(latent["samples"].shape) == rec["latent_shape"]
    audio = pos[0][1]["audio_embed"]
    torch.testing.assert_close(audio, tensor(rec["positive"]["audio_embed"]), atol=ATOL, rtol=RTOL)
    negative = neg[0][1]["audio_embed"]
    assert list(negative.shape) == rec["negative"]["audio_shape"] and rec["negative"]["zero"] and not negative.any()
    for side, r in ((pos, rec["positive"]), (neg, rec["negative"])):
        (ref,) = side[0][1]["reference_latents"]
        torch.testing.assert_close(ref, tensor(r["reference_latents"][0]), atol=0, rtol=0)


def test_without_audio_the_node_gives_comfyuis_zeros(workspace) -> None:
    rec = FIXTURE["nodes"]["no_audio"]
    pos, neg, latent = _node(**rec["inputs"])
    assert list(latent["samples"].shape) == rec["latent_shape"]
    assert list(pos[0][1]["audio_embed"].shape) == rec["audio_shape"] and not pos[0][1]["audio_embed"].any()
    assert [list(r.shape) for r in pos[0][1]["reference_latents"]] == rec["positive"]["reference_latents"]


@pytest.mark.parametrize("case", FIXTURE["model"]["cases"], ids=lambda c: c["name"])
def test_the_denoised_output_equals_comfyuis(workspace, case) -> None:
    ref = make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES[case["model"]]])
    model = loader.load_diffusion_model(ref)
    assert type(model).__name__ == "WanHumoDiffusionModel"
    ms = model_sampling_from_config(model.sampling)
    x = tensor(case["x"])
    sigma = torch.full((x.shape[0],), case["sigma"])
    cond = {"context": tensor(case["context"])}
    if case["reference"] is not None:
        cond["ref_latents"] = [model.latent_format.process_in(tensor(case["reference"]))]
    if case["audio_kind"] == "seeded":
        cond["audio_embed"] = tensor(case["audio"])
    elif case["audio_kind"] == "zeros":  # ComfyUI's own zeros are 1280 wide: they project as the tiny width's
        cond["audio_embed"] = torch.zeros(*tensor(case["audio"]).shape[:-1], 1280)
    with torch.no_grad():
        out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
        denoised = ms.calculate_denoised(sigma, out, x)
    rec = case["denoised"]
    torch.testing.assert_close(at_recorded(denoised, rec), tensor(rec), atol=ATOL, rtol=RTOL)


def test_audio_of_another_width_is_refused_by_name(workspace) -> None:
    ref = make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["humo"]])
    model = loader.load_diffusion_model(ref)
    cond = {"context": torch.zeros(1, 6, 32), "audio_embed": torch.ones(1, 1, 8, 5, 1280)}
    with pytest.raises(ValueError, match="audio_embed"):
        model.apply(torch.zeros(1, 16, 1, 4, 4), torch.tensor([500.0]), cond)
