"""LTXVAudioVAEEncode on the demo's tiny LTX-2 checkpoint (its audio_vae.* in the published layout) equals
upstream ComfyUI 0.10.0's AudioVAE.encode (tests/nodes/fixtures/comfyui_ltxv_audio_encode.json, recorded by
scripts/record_comfyui_ltxv_audio_encode.py with torchaudio's own resampling and mel spectrogram): stereo
resampled from 44.1 kHz, mono at the VAE's rate spread to stereo, a batch at 24 kHz; bad inputs are named."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
import torch

from nodes.library.ltxv_audio import LTXVAudioVAEEncode, LTXVAudioVAELoader
from nodes.models.ltx2_demo import FILES, build_demo_ltx2
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltxv_audio_encode.json").read_text())


@pytest.fixture(scope="module")
def audio_vae(tmp_path_factory):
    """The tiny checkpoint's audio VAE in an active workspace of its own, its ModelFns run in-process."""
    from nodes import workspace as ws_module

    previous = ws_module._active
    ws = ws_module.activate(ws_module.Workspace(tmp_path_factory.mktemp("ltx-audio-ws")).create())
    build_demo_ltx2(ws.models_dir)
    digest = hashlib.sha256((ws.models_dir / FILES["checkpoint"]).read_bytes()).hexdigest()
    assert digest == FIXTURE["files"]["checkpoint"]["sha256"], f"re-record with {FIXTURE['recorded_by']}"
    yield LTXVAudioVAELoader().execute(Path(FILES["checkpoint"]).name)[0]
    ws_module._active = previous


@pytest.mark.parametrize("index", range(len(FIXTURE["cases"])))
def test_encode_equals_comfyui_0_10(audio_vae, index: int) -> None:
    torch.set_num_threads(1)
    case = FIXTURE["cases"][index]
    waveform = 0.3 * torch.randn(*case["shape"], generator=torch.Generator().manual_seed(case["seed"]))
    (latent,) = asyncio.run(
        LTXVAudioVAEEncode().execute({"waveform": waveform, "sample_rate": case["sample_rate"]}, audio_vae)
    )
    assert (latent["sample_rate"], latent["type"]) == (FIXTURE["vae_sample_rate"], "audio")
    torch.testing.assert_close(latent["samples"], tensor(case["latent"]), atol=1e-5, rtol=1e-5)


def test_bad_inputs_are_named(audio_vae) -> None:
    with pytest.raises(ValueError, match="audio: the LTX-2 audio VAE encodes 1 or 2 channels, got 3"):
        asyncio.run(LTXVAudioVAEEncode().execute({"waveform": torch.zeros(1, 3, 800), "sample_rate": 16000}, audio_vae))
    with pytest.raises(ValueError, match="audio: expected an AUDIO"):
        asyncio.run(LTXVAudioVAEEncode().execute({"waveform": torch.zeros(800)}, audio_vae))
    with pytest.raises(ValueError, match="audio_vae: expected the Audio VAE"):
        asyncio.run(LTXVAudioVAEEncode().execute({"waveform": torch.zeros(1, 2, 800), "sample_rate": 16000}, None))
