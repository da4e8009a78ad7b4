"""LTX-2's audio VAE in the published layout (audio_vae.*, vocoder.*, configs in the metadata) decodes as upstream
ComfyUI 0.10.0 does: tests/models/fixtures/comfyui_ltx2_audio.safetensors holds a tiny file built and decoded by
ComfyUI's own classes (scripts/record_comfyui_ltx2_audio.py), its input latent and ComfyUI's waveform."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from nodes.models.errors import ModelLoadError
from nodes.models.ltx2_audio import is_audio_vae, load_audio_vae

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_ltx2_audio.safetensors"
EMPTY_CASES = [(97, 25), (1, 24), (121, 24), (9, 8)]  # as the recorder's


@pytest.fixture(scope="module")
def recorded():
    tensors = load_file(FIXTURE)
    with safe_open(FIXTURE, "pt") as f:
        metadata = f.metadata()
    record = {k.removeprefix("record."): tensors.pop(k) for k in list(tensors) if k.startswith("record.")}
    return tensors, metadata, record


@pytest.fixture(scope="module")
def vae(recorded):
    weights, metadata, _ = recorded
    return load_audio_vae(weights, metadata)


def test_decode_equals_comfyui_0_10(vae, recorded):
    torch.set_num_threads(1)
    _, _, record = recorded
    waveform = vae.decode(record["latent"])
    assert waveform.shape == record["waveform"].shape == (2, 2, 424)
    assert record["waveform"].abs().max() < 0.9  # the tanh is not saturated: the values say something
    torch.testing.assert_close(waveform, record["waveform"], atol=1e-6, rtol=0)


def test_sizes_and_rates_equal_comfyui_0_10(vae, recorded):
    _, _, record = recorded
    channels, bins, rate, out_rate = record["facts"].tolist()
    assert (vae.latent_channels, vae.mean.numel() // vae.latent_channels, vae.sample_rate, vae.output_sample_rate) == (
        channels,
        bins,
        rate,
        out_rate,
    )
    assert [vae.latent_frames(f, r) for f, r in EMPTY_CASES] == record["empty_counts"].tolist()


def test_statistics_are_applied(vae, recorded):
    """With identity statistics the waveform differs: the file's per-feature mean and std are used."""
    _, _, record = recorded
    mean, std = vae.mean, vae.std
    vae.mean, vae.std = torch.zeros_like(mean), torch.ones_like(std)
    try:
        assert not torch.allclose(vae.decode(record["latent"]), record["waveform"], atol=1e-4)
    finally:
        vae.mean, vae.std = mean, std


def test_detection_marker(recorded):
    weights, _, _ = recorded
    assert is_audio_vae(weights)
    assert not is_audio_vae({k: v for k, v in weights.items() if not k.startswith("audio_vae.")})


def test_bad_files_and_latents_are_named(vae, recorded):
    weights, metadata, _ = recorded
    with pytest.raises(ModelLoadError, match="metadata has no 'config'"):
        load_audio_vae(weights, {})
    with pytest.raises(ModelLoadError, match="missing audio_vae.per_channel_statistics.std-of-means"):
        load_audio_vae({k: v for k, v in weights.items() if "std-of-means" not in k}, metadata)
    config = json.loads(metadata["config"])
    config["vocoder"]["resblock"] = "AMP1"
    with pytest.raises(ModelLoadError, match="supported as LTX-2.0's HiFi-GAN .resblock '1'. only"):
        load_audio_vae(weights, {"config": json.dumps(config)})
    with pytest.raises(ModelLoadError, match="the vocoder does not match its config"):
        load_audio_vae({k: v for k, v in weights.items() if "conv_post" not in k}, metadata)
    with pytest.raises(ValueError, match="an audio latent of 8 channels x 16 frequency bins was expected, got 8 x 4"):
        vae.decode(torch.zeros(1, 8, 3, 4))


def test_demo_checkpoint_carries_the_audio_vae_in_comfyuis_layout(recorded, demo_workspace):
    """ltx2-tiny's checkpoint holds what LTXVAudioVAELoader reads from it (the LTX-2 templates load the audio VAE
    from the checkpoint): the demo's builder, given the recorded file's config, writes that file's keys and shapes
    (ComfyUI's own classes built it); the checkpoint carries the builder's tensors at the demo's config (a 16 kHz
    vocoder: AAC cannot store the recorded file's 2 kHz) and decodes to non-silent stereo at 16 kHz."""
    from nodes.models.ltx2_audio import read_audio_vae
    from nodes.models.ltx2_demo import AUDIO_CONFIG, FILES, tiny_audio_state_dict

    tensors, metadata, _ = recorded
    recorded_config = json.loads(metadata["config"])
    built = tiny_audio_state_dict(config=recorded_config)
    assert {k: tuple(v.shape) for k, v in built.items()} == {k: tuple(v.shape) for k, v in tensors.items()}
    assert AUDIO_CONFIG["audio_vae"] == recorded_config["audio_vae"]
    path = demo_workspace.models_dir / FILES["checkpoint"]
    with safe_open(path, "pt") as f:
        config = json.loads(f.metadata()["config"])
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys() if k.startswith(("audio_vae.", "vocoder."))}
    assert shapes == {k: tuple(v.shape) for k, v in tiny_audio_state_dict().items()}
    assert {k: config[k] for k in ("audio_vae", "vocoder")} == AUDIO_CONFIG
    vae = read_audio_vae(str(path))
    waveform = vae.decode(torch.randn(1, 8, 4, 16, generator=torch.Generator().manual_seed(0)))
    assert vae.output_sample_rate == 16000
    assert waveform.shape[:2] == (1, 2) and waveform.shape[2] > 0 and waveform.abs().mean() > 1e-3
