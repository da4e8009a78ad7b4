"""LTX-2's audio-video transformer and video VAE checked against upstream ComfyUI 0.10.0 on ltx2-tiny's checkpoint.

tests/models/fixtures/comfyui_ltx2.json was recorded by scripts/record_comfyui_ltx2.py: ComfyUI loaded the file
nodes.models.ltx2_demo writes (UNETLoader's comfy.sd.load_diffusion_model: detection from the keys and the
metadata's transformer config) and evaluated one denoising step through its BaseModel (model_base.LTXAV: the
video and audio latents packed together, ModelSamplingFlux at shift 2.37, per-token timesteps from a noise mask),
and loaded its video VAE as CheckpointLoaderSimple does (comfy.sd.VAE from the "vae" block lists) to encode frames
and decode latents. The file is built here again (same seed, same bytes: the fixture's sha256 says so)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from nodes.arch import latent_format, sampling_config
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.ltx2 import pack, unpack
from nodes.models.ltx2_demo import FILES, TRANSFORMER_CONFIG, VAE_CONFIG, build_demo_ltx2, metadata
from nodes.sampling.model_sampling import model_sampling_from_config

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx2.json").read_text())
ATOL = 1e-5


def tensor(d: dict) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(base64.b64decode(d["f32"]), dtype=np.float32).copy()).reshape(d["shape"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ltx2") / "models"
    build_demo_ltx2(root)
    return root / FILES["checkpoint"]


@pytest.fixture(scope="module")
def model(checkpoint):
    return loader.load_diffusion_model(make_ref("diffusion_model", "ltx2", [checkpoint]))


def test_demo_file_is_the_recorded_one(checkpoint) -> None:
    assert hashlib.sha256(checkpoint.read_bytes()).hexdigest() == FIXTURE["sha256"], (
        f"{FILES['checkpoint']} changed: re-record tests/models/fixtures/comfyui_ltx2.json"
    )


def test_file_has_the_released_layout_and_is_detected(checkpoint) -> None:
    keys = set(load_file(checkpoint))
    assert {
        "model.diffusion_model.patchify_proj.weight",
        "model.diffusion_model.audio_patchify_proj.weight",
        "model.diffusion_model.adaln_single.emb.timestep_embedder.linear_1.bias",
        "model.diffusion_model.audio_adaln_single.linear.weight",
        "model.diffusion_model.av_ca_a2v_gate_adaln_single.linear.weight",
        "model.diffusion_model.transformer_blocks.1.scale_shift_table_a2v_ca_video",
        "model.diffusion_model.transformer_blocks.0.audio_to_video_attn.q_norm.weight",
        "model.diffusion_model.audio_caption_projection.linear_1.weight",
    } <= keys
    info = probe(checkpoint)
    assert (info.arch, info.kind, info.prefix) == ("ltx2", "checkpoint", "model.diffusion_model.")
    assert info.components == {"diffusion_model", "vae"}
    assert {
        "vae.encoder.down_blocks.1.conv.conv.weight",
        "vae.encoder.down_blocks.8.res_blocks.0.conv2.conv.weight",
        "vae.decoder.up_blocks.0.res_blocks.0.conv1.conv.weight",
        "vae.decoder.up_blocks.5.conv.conv.weight",
        "vae.per_channel_statistics.mean-of-means",
        "vae.per_channel_statistics.std-of-means",
    } <= keys


def test_sizes_come_from_the_tensors_and_the_metadata(model) -> None:
    facts = FIXTURE["facts"]
    assert facts["class"] == "LTXAV" and facts["dtype"] == "torch.float32"
    cfg = model.module.config
    assert cfg.num_layers == facts["num_layers"] == 2
    assert cfg.num_attention_heads * cfg.attention_head_dim == facts["inner_dim"]
    assert cfg.audio_num_attention_heads * cfg.audio_attention_head_dim == facts["audio_inner_dim"]
    assert (cfg.rope_type, facts["rope_split"]) == ("split", "LTXRopeType.SPLIT")
    assert model.sampling == {"kind": "flux", "shift": facts["shift"]} == sampling_config("ltx2")
    assert latent_format("ltx2").channels == 128


@pytest.mark.parametrize("name", sorted(FIXTURE["cases"]))
def test_denoising_step_equals_comfyuis(model, name: str) -> None:
    """One evaluation at sigma: text-to-video, a cond/uncond batch of two, image-to-video's kept first frame."""
    torch.set_num_threads(1)
    case = FIXTURE["cases"][name]
    video, audio = tensor(case["video"]), tensor(case["audio"])
    shapes = [video.shape, audio.shape]
    cond = {"context": tensor(case["context"]), "latent_shapes": shapes, "frame_rate": case["frame_rate"]}
    if "denoise_mask" in case:
        cond["denoise_mask"] = tensor(case["denoise_mask"])
    sigma = torch.tensor(case["sigma"])
    ms = model_sampling_from_config(model.sampling)
    x = pack([video, audio])
    with torch.no_grad():
        denoised = ms.calculate_denoised(sigma, model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond), x)
    got_video, got_audio = unpack(denoised, shapes)
    want_video, want_audio = tensor(case["denoised_video"]), tensor(case["denoised_audio"])
    assert want_video.abs().mean() > 0.1 and (want_video - video).abs().mean() > 0.1  # the step moved the latent
    torch.testing.assert_close(got_video, want_video, atol=ATOL, rtol=0)
    torch.testing.assert_close(got_audio, want_audio, atol=ATOL, rtol=0)


def test_kept_frame_changes_the_step(model) -> None:
    """The noise mask is read: without it the image-to-video case gives other numbers than ComfyUI's."""
    case = FIXTURE["cases"]["i2v_mask"]
    video, audio = tensor(case["video"]), tensor(case["audio"])
    cond = {"context": tensor(case["context"]), "latent_shapes": [video.shape, audio.shape], "frame_rate": 24.0}
    with torch.no_grad():
        out = model.apply(pack([video, audio]), torch.tensor(case["sigma"]), cond)
    denoised_video = unpack(
        pack([video, audio]) - torch.tensor(case["sigma"]).view(-1, 1, 1) * out, cond["latent_shapes"]
    )[0]
    assert (denoised_video - tensor(case["denoised_video"])).abs().max() > 1e-3


@pytest.fixture(scope="module")
def vae(checkpoint):
    return loader.load_vae(make_ref("vae", "ltx2", [checkpoint]))


@pytest.mark.parametrize("index", range(len(FIXTURE["vae"]["encode"])))
def test_vae_encode_equals_comfyuis(vae, index: int) -> None:
    """9 frames of 64x96, and one odd-sized frame that ComfyUI centre-crops to 64x32."""
    torch.set_num_threads(1)
    case = FIXTURE["vae"]["encode"][index]
    want = tensor(case["latent"])
    assert want.abs().mean() > 0.1
    torch.testing.assert_close(vae.encode(tensor(case["pixels"])), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("index", range(len(FIXTURE["vae"]["decode"])))
def test_vae_decode_equals_comfyuis(vae, index: int) -> None:
    """Two latent frames -> 9 video frames; a batch of two one-frame latents -> two images."""
    torch.set_num_threads(1)
    case = FIXTURE["vae"]["decode"][index]
    want = tensor(case["image"])  # ComfyUI's [B,T,H,W,3]; VAEDecode hands on [B*T,H,W,3]
    assert 0.05 < float(((want > 0) & (want < 1)).float().mean())  # not all clamped
    got = vae.decode(tensor(case["latent"]))
    assert got.shape == (want.shape[0] * want.shape[1], *want.shape[2:])
    torch.testing.assert_close(got, want.reshape(got.shape), atol=ATOL, rtol=0)


def test_vae_refuses_bad_frame_counts_and_shapes(vae) -> None:
    with pytest.raises(ValueError, match="1 \\+ 8k frames"):
        vae.encode(torch.rand(4, 64, 64, 3))
    with pytest.raises(ValueError, match="128, frames, height, width"):
        vae.decode(torch.randn(1, 16, 2, 2))


def _rewrite(checkpoint: Path, path: Path, meta: dict[str, str], drop: str | None = None) -> Path:
    sd = {k: v for k, v in load_file(checkpoint).items() if k != drop}
    save_file(sd, str(path), metadata=meta)
    return path


@pytest.mark.parametrize(
    ("setting", "value"), [("use_middle_indices_grid", False), ("causal_temporal_positioning", False)]
)
def test_unsupported_settings_are_refused_by_name(checkpoint, tmp_path, setting: str, value) -> None:
    meta = {"config": json.dumps({"transformer": {**TRANSFORMER_CONFIG, setting: value}})}
    path = _rewrite(checkpoint, tmp_path / "other.safetensors", meta)
    with pytest.raises(ModelLoadError, match=setting):
        loader.load_diffusion_model(make_ref("diffusion_model", "ltx2", [path]))


def test_vae_with_timestep_conditioning_is_refused_by_name(checkpoint, tmp_path) -> None:
    meta = {
        "config": json.dumps({"transformer": TRANSFORMER_CONFIG, "vae": {**VAE_CONFIG, "timestep_conditioning": True}})
    }
    path = _rewrite(checkpoint, tmp_path / "vae_t.safetensors", meta)
    with pytest.raises(ModelLoadError, match="timestep conditioning"):
        loader.load_vae(make_ref("vae", "ltx2", [path]))


def test_bad_metadata_and_missing_tensors_are_refused(checkpoint, tmp_path) -> None:
    path = _rewrite(checkpoint, tmp_path / "bad_meta.safetensors", {"config": "{not json"})
    with pytest.raises(ModelLoadError, match="metadata 'config' is not JSON"):
        loader.load_diffusion_model(make_ref("diffusion_model", "ltx2", [path]))
    drop = "model.diffusion_model.transformer_blocks.1.audio_ff.net.2.weight"
    path = _rewrite(checkpoint, tmp_path / "missing.safetensors", metadata(), drop=drop)
    with pytest.raises(ModelLoadError, match="missing tensor"):
        loader.load_diffusion_model(make_ref("diffusion_model", "ltx2", [path]))
