"""The model-free LTX-2 latent and image nodes equal upstream ComfyUI 0.10.0's outputs on the same inputs
(tests/nodes/fixtures/comfyui_ltxv_av.json, recorded by scripts/record_comfyui_ltxv_av.py, whose `cases()` builds
the inputs both sides use), and refuse bad input by name."""

from __future__ import annotations

import importlib.util
import json
import pickle
from pathlib import Path

import pytest
import torch

from nodes.library.ltxv_av import (
    AVLatent,
    EmptyLTXVLatentVideo,
    LTXVConcatAVLatent,
    LTXVCropGuides,
    LTXVPreprocess,
    LTXVSeparateAVLatent,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltxv_av.json").read_text())


def _recorder():
    spec = importlib.util.spec_from_file_location("record_ltxv_av", REPO / "scripts" / "record_comfyui_ltxv_av.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()
CASES = RECORDER.cases()


@pytest.mark.parametrize("index", range(len(RECORDER.EMPTY_CASES)))
def test_empty_latent_shape_equals_comfyui_0_10(index):
    (latent,) = EmptyLTXVLatentVideo().execute(*RECORDER.EMPTY_CASES[index])
    assert list(latent["samples"].shape) == FIXTURE["empty"][index]
    assert not latent["samples"].any()


@pytest.mark.parametrize("index", range(len(CASES["concat"])))
def test_concat_and_separate_equal_comfyui_0_10(index):
    video, audio = CASES["concat"][index]
    (joined,) = LTXVConcatAVLatent().execute(video, audio)
    assert isinstance(joined["samples"], AVLatent)
    assert RECORDER.plain(joined) == FIXTURE["concat"][index]
    # The joined latent crosses process boundaries between executors.
    separated = LTXVSeparateAVLatent().execute(pickle.loads(pickle.dumps(joined)))
    assert RECORDER.plain(list(separated)) == FIXTURE["separate"][index]


@pytest.mark.parametrize("index", range(len(CASES["crop"])))
def test_crop_guides_equals_comfyui_0_10(index):
    positive, negative, latent = CASES["crop"][index]
    out = LTXVCropGuides().execute(positive, negative, dict(latent))
    assert RECORDER.plain(list(out)) == FIXTURE["crop"][index]


@pytest.mark.parametrize("index", range(len(CASES["preprocess"])))
def test_preprocess_equals_comfyui_0_10(index):
    image, crf = CASES["preprocess"][index]
    (out,) = LTXVPreprocess().execute(image, crf)
    assert RECORDER.plain((out * 255).round().to(torch.uint8)) == FIXTURE["preprocess"][index]


def test_preprocess_compresses_and_crops_to_even_sides():
    image, _ = CASES["preprocess"][1]  # 33 x 49
    (out,) = LTXVPreprocess().execute(image, 30)
    assert out.shape == (1, 32, 48, 3)
    assert not torch.equal(out, image[:, :32, :48])


def test_bad_inputs_are_named():
    video, audio = CASES["concat"][0]
    with pytest.raises(TypeError, match="av_latent: expected an audio-video latent"):
        LTXVSeparateAVLatent().execute(video)
    (joined,) = LTXVConcatAVLatent().execute(video, audio)
    with pytest.raises(ValueError, match="video_latent: already an audio-video latent"):
        LTXVConcatAVLatent().execute(joined, audio)
    with pytest.raises(TypeError, match="audio_latent: expected a LATENT"):
        LTXVConcatAVLatent().execute(video, torch.zeros(1))
    positive, negative, _ = CASES["crop"][0]
    with pytest.raises(ValueError, match=r"latent: expected a video latent .* got \(1, 8, 5, 4\)"):
        LTXVCropGuides().execute(positive, negative, audio)
    with pytest.raises(ValueError, match="img_compression: 101 is outside"):
        LTXVPreprocess().execute(torch.zeros(1, 8, 8, 3), 101)
    with pytest.raises(ValueError, match="image: expected an IMAGE"):
        LTXVPreprocess().execute(torch.zeros(8, 8, 3), 35)


def test_sampling_an_audio_video_latent_is_refused_by_name():
    from cluster.refs import ModelRef
    from nodes.ksampler import fix_empty_latent_channels

    (joined,) = LTXVConcatAVLatent().execute(*CASES["concat"][0])
    sd1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))
    with pytest.raises(ValueError, match="latent_image: an audio-video latent .* cannot be sampled by the sd1 model"):
        fix_empty_latent_channels(sd1, joined["samples"])
