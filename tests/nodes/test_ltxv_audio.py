"""LTX-2's audio VAE nodes on the tiny published-layout file that upstream ComfyUI 0.10.0 built and decoded
(tests/models/fixtures/comfyui_ltx2_audio.safetensors, scripts/record_comfyui_ltx2_audio.py): the empty latent's
size and the decoded waveform (through the ltx2_audio_decode ModelFn, also from an audio-video latent) equal
ComfyUI's; bad inputs are named."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nodes.library.ltxv_audio import (
    LTXVAudioVAEDecode,
    LTXVAudioVAELoader,
    LTXVEmptyLatentAudio,
)
from nodes.library.ltxv_av import LTXVConcatAVLatent

FIXTURE = Path(__file__).resolve().parents[1] / "models" / "fixtures" / "comfyui_ltx2_audio.safetensors"
NAME = "ltx-2-audio-vae-tiny.safetensors"
EMPTY_CASES = [(97, 25), (1, 24), (121, 24), (9, 8)]  # as the recorder's


@pytest.fixture(scope="module")
def record():
    return {k.removeprefix("record."): v for k, v in load_file(FIXTURE).items() if k.startswith("record.")}


@pytest.fixture
def audio_vae(demo_workspace):
    folder = demo_workspace.models_dir / "checkpoints"
    shutil.copy(FIXTURE, folder / NAME)
    try:
        yield LTXVAudioVAELoader().execute(NAME)[0]
    finally:
        (folder / NAME).unlink()


def test_empty_latent_equals_comfyui_0_10(audio_vae, record):
    for (frames, rate), count in zip(EMPTY_CASES, record["empty_counts"].tolist()):
        (latent,) = LTXVEmptyLatentAudio().execute(frames, rate, 2, audio_vae)
        assert latent["samples"].shape == (2, 8, count, 16) and not latent["samples"].any()
        assert (latent["sample_rate"], latent["type"]) == (16000, "audio")


def test_decode_equals_comfyui_0_10(audio_vae, record):
    torch.set_num_threads(1)
    (audio,) = asyncio.run(LTXVAudioVAEDecode().execute({"samples": record["latent"]}, audio_vae))
    assert audio["sample_rate"] == int(record["facts"][3]) == 2000
    torch.testing.assert_close(audio["waveform"], record["waveform"], atol=1e-6, rtol=0)
    video = {"samples": torch.zeros(2, 128, 2, 2, 2)}
    (joined,) = LTXVConcatAVLatent().execute(video, {"samples": record["latent"], "sample_rate": 16000})
    (from_av,) = asyncio.run(LTXVAudioVAEDecode().execute(joined, audio_vae))
    assert torch.equal(from_av["waveform"], audio["waveform"])


def test_bad_inputs_are_named(audio_vae, demo_workspace):
    with pytest.raises(ValueError, match="ckpt_name: cannot load model .*not an LTX-2 audio VAE"):
        LTXVAudioVAELoader().execute("sd1-tiny.safetensors")
    with pytest.raises(ValueError, match="audio_vae: expected the Audio VAE of LTXV Audio VAE Loader"):
        LTXVEmptyLatentAudio().execute(97, 25, 1, "vae")
    with pytest.raises(ValueError, match=r"samples: expected an audio latent .* got \(1, 128, 2, 2, 2\)"):
        asyncio.run(LTXVAudioVAEDecode().execute({"samples": torch.zeros(1, 128, 2, 2, 2)}, audio_vae))


def test_an_audio_vae_file_through_vae_loader_decodes_as_comfyui(demo_workspace, record):
    """LTX-2.5's templates load their audio VAE file with VAELoader (ComfyUI's VAE tells it by its vocoder): the
    same file decodes to ComfyUI's waveform; an image VAE decoder refuses it with a pointer to the audio node."""
    from nodes.library.vae_audio import VAEDecodeAudio
    from nodes.loaders import VAELoader

    torch.set_num_threads(1)
    name = "ltx-2.5-audio-vae-tiny.safetensors"
    path = demo_workspace.models_dir / "vae" / name
    shutil.copy(FIXTURE, path)
    try:
        (vae,) = VAELoader().load_vae(name)
        assert (vae.component, vae.arch) == ("vae", "ltx2_audio")
        (latent,) = LTXVEmptyLatentAudio().execute(97, 25, 1, vae)
        assert latent["samples"].shape[1:] == (8, int(record["empty_counts"][0]), 16)
        (audio,) = asyncio.run(LTXVAudioVAEDecode().execute({"samples": record["latent"]}, vae))
        torch.testing.assert_close(audio["waveform"], record["waveform"], atol=1e-6, rtol=0)
        with pytest.raises(ValueError, match="LTXV Audio VAE Decode"):
            asyncio.run(VAEDecodeAudio().execute({"samples": record["latent"]}, vae))
    finally:
        path.unlink()
