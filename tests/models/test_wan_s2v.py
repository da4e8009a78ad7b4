"""Wan 2.2 sound-to-video checked against ComfyUI 0.3.64 on the tiny files (nodes/models/wan_s2v_demo.py).

tests/models/fixtures/comfyui_wan_s2v.json.xz was recorded by scripts/record_comfyui_wan_s2v.py: ComfyUI's
wav2vec 2.0 audio encoder, WanSoundImageToVideo / WanSoundImageToVideoExtend (without a VAE) and WanModel_S2V on
these files' tensors."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from nodes.library.wan_s2v import WanSoundImageToVideo, WanSoundImageToVideoExtend, audio_bucket
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.audio_encoder import load_audio_encoder
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.wan_s2v import WanS2VDiffusionModel
from nodes.models.wan_s2v_demo import FILES, build_demo_wan_s2v, s2v_model
from tests.node_calls import active_workspace
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_s2v.json.xz")
ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("s2v")
    build_demo_wan_s2v(out)
    return out


@pytest.fixture(scope="module")
def encoder(models):
    path = models / FILES["audio_encoder"]
    return load_audio_encoder(load_file(path), str(path))


@pytest.fixture(scope="module")
def model(models):
    path = models / FILES["s2v"]
    return loader.load_diffusion_model(make_ref("diffusion_model", probe(path).arch, [path]))


def _close(ours: torch.Tensor, entry: dict) -> None:
    ref = tensor(entry)
    ours = at_recorded(ours.detach().float(), entry)
    assert ours.shape == ref.shape
    torch.testing.assert_close(ours, ref, atol=ATOL, rtol=RTOL)


def test_tiny_files_are_the_recorded_ones(models) -> None:
    for name, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[name]
        assert hashlib.sha256((models / FILES[name]).read_bytes()).hexdigest() == rec["sha256"], "re-record"


@pytest.mark.parametrize("case", ["stereo", "batch2"])
def test_audio_encoder_matches_comfyui(encoder, case) -> None:
    rec = FIXTURE["audio_encoder"][case]
    last, layers = encoder.encode(tensor(rec["waveform"]))
    assert layers.shape[0] == 25
    _close(last, rec["encoded"])
    _close(layers, rec["all_layers"])


def _encoded(encoder) -> dict:
    wave = tensor(FIXTURE["audio_encoder"]["stereo"]["waveform"])
    last, layers = encoder.encode(wave)
    return {"encoded_audio": last, "encoded_audio_all_layers": tuple(layers.unbind(0)), "audio_samples": wave.shape[2]}


def _check_values(conditioning: list, rec: dict) -> None:
    opts = conditioning[0][1]
    assert sorted(k for k in ("audio_embed", "control_video", "reference_motion") if k in opts) == sorted(rec)
    for key, entry in rec.items():
        _close(opts[key], entry)


@pytest.mark.parametrize("case", ["first", "extend", "extend_past_audio"])
def test_nodes_condition_as_comfyui(encoder, case) -> None:
    rec = FIXTURE["nodes"][case]
    text = [[torch.zeros(1, 4, 32), {}]]
    encoded = _encoded(encoder)
    if case == "first":
        args = rec["inputs"]
        node = WanSoundImageToVideo().execute(text, text, None, audio_encoder_output=encoded, **args)
    else:
        latent = {"samples": tensor(rec["inputs"]["video_latent"])}
        node = WanSoundImageToVideoExtend().execute(
            text, text, None, rec["inputs"]["length"], latent, audio_encoder_output=encoded
        )
    positive, negative, latent = asyncio.run(node)
    _check_values(positive, rec["positive"])
    _check_values(negative, rec["negative"])
    assert list(latent["samples"].shape) == rec["latent_shape"]


@pytest.fixture(scope="module")
def vae_workspace(tmp_path_factory):
    from nodes.models.wan_demo import build_demo_wan

    yield from active_workspace(tmp_path_factory.mktemp("s2v-vae-ws"), build_demo_wan)


@pytest.mark.parametrize("case", ["first", "extend"])
def test_nodes_with_a_vae_condition_as_comfyui(encoder, vae_workspace, case) -> None:
    """The reference image, control video and ref_motion encoded by the tiny Wan 2.1 VAE, as ComfyUI's nodes do."""
    from nodes.models.wan_demo import FILES as WAN_FILES

    rec = FIXTURE["nodes_with_vae"]
    images = {k: tensor(v) for k, v in rec["images"].items()}
    vae = make_ref("vae", "qwen_image", [vae_workspace.models_dir / WAN_FILES["vae"]])
    text = [[torch.zeros(1, 4, 32), {}]]
    if case == "first":
        node = WanSoundImageToVideo().execute(
            text, text, vae, 48, 32, 9, 1, audio_encoder_output=_encoded(encoder), **images
        )
    else:
        node = WanSoundImageToVideoExtend().execute(
            text,
            text,
            vae,
            9,
            {"samples": tensor(rec["video_latent"])},
            audio_encoder_output=_encoded(encoder),
            ref_image=images["ref_image"],
            control_video=images["control_video"],
        )
    positive, negative, latent = asyncio.run(node)
    expected = dict(rec[case]["positive"])
    refs = expected.pop("reference_latents")
    _check_values(positive, expected)
    _check_values(negative, rec[case]["negative"])
    for side in (positive, negative):
        ours = side[0][1]["reference_latents"]
        assert len(ours) == len(refs) == 1
        _close(ours[0], refs[0])
    assert list(latent["samples"].shape) == rec[case]["latent_shape"]


def test_audio_bucket_pads_whole_clips_with_zeros() -> None:
    features = torch.arange(1.0, 11.0).reshape(1, 10, 1)  # 10 frames at 30 fps = 1/3 s
    bucket = audio_bucket(features, 8)  # one clip of 8 frames at 16 fps: 15 frames at 30 fps, 10 of them audio
    assert bucket.shape == (1, 1, 1, 8)
    # frame k reads 30 fps frame round(1.875 k): 0 2 4 6 8 (7.5 to even) 9 11 13, the last two past the audio
    assert bucket[0, 0, 0].tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 10.0, 0.0, 0.0]


def test_detected_as_s2v(model) -> None:
    assert isinstance(model, WanS2VDiffusionModel)
    assert len(model.module.s2v.audio_injector.injector) == 12 and len(model.module.blocks) == 5


def test_scaled_fp8_file_loads_as_its_dequantized_weights(tmp_path) -> None:
    """ComfyUI's scaled fp8 layout (the template's wan2.2_s2v_14B_fp8_scaled, under `model.diffusion_model.`): the
    S2V parts' and the blocks' matrices in float8 with their scales give the network of the dequantized weights."""
    plain, scaled = {}, {"scaled_fp8": torch.empty(0, dtype=torch.float8_e4m3fn)}
    for key, value in s2v_model().items():
        layer, _, name = key.rpartition(".")
        if name == "weight" and value.dim() == 2 and key.startswith(("blocks.", "audio_injector.")):
            scale = value.float().abs().max() / torch.finfo(torch.float8_e4m3fn).max
            q = (value.float() / scale).to(torch.float8_e4m3fn)
            scaled[key], scaled[f"{layer}.scale_weight"] = q, scale
            plain[key] = q.float() * scale
        else:
            scaled[key], plain[key] = value, value.float()
    models = {}
    for name, sd in (("fp8", scaled), ("plain", plain)):
        path = tmp_path / f"{name}.safetensors"
        save_file({f"model.diffusion_model.{k}": v for k, v in sd.items()}, path)
        models[name] = loader.load_diffusion_model(make_ref("diffusion_model", probe(path).arch, [path]))
    assert isinstance(models["fp8"], WanS2VDiffusionModel)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(1, 16, 2, 8, 8, generator=gen)
    cond = {"context": torch.randn(1, 6, 32, generator=gen), "audio_embed": torch.randn(1, 25, 64, 8, generator=gen)}
    with torch.no_grad():
        out = [m.apply(x, torch.tensor([600.0]), cond) for m in models.values()]
    assert torch.equal(out[0], out[1])


def test_a_broken_s2v_file_is_refused_by_name(tmp_path) -> None:
    sd = s2v_model()
    del sd["audio_injector.injector.3.k.weight"]
    path = tmp_path / "broken_s2v.safetensors"
    save_file(sd, path)
    with pytest.raises(ModelLoadError, match="Wan S2V parts"):
        loader.load_diffusion_model(make_ref("diffusion_model", probe(path).arch, [path]))


@pytest.mark.parametrize("case", ["all", "no_motion", "short_motion", "bare"])
def test_network_matches_comfyui(model, case) -> None:
    rec = FIXTURE["model"]
    inputs = {k: tensor(v) for k, v in rec["inputs"].items()}
    keys = rec["cases"][case]["inputs"]
    cond = {"context": inputs["context"]}
    for key in keys:
        if key == "reference_latent":
            cond["ref_latents"] = [inputs[key]]
        else:
            cond["reference_motion" if key == "short_motion" else key] = inputs[key]
    with torch.no_grad():
        out = model.apply(inputs["x"], inputs["timestep"], cond)
    _close(out, rec["cases"][case]["out"])
