"""LTX-2's audio-video transformer, video VAE and text encoder checked against upstream ComfyUI 0.10.0 on ltx2-tiny's
files.

tests/models/fixtures/comfyui_ltx2.json.xz was recorded by scripts/record_comfyui_ltx2.py: ComfyUI loaded the file
nodes.models.ltx2_demo writes (UNETLoader's comfy.sd.load_diffusion_model: detection from the keys and the
metadata's transformer config) and evaluated one denoising step through its BaseModel (model_base.LTXAV: the
video and audio latents packed together, ModelSamplingFlux at shift 2.37, per-token timesteps from a noise mask),
and loaded its video VAE as CheckpointLoaderSimple does (comfy.sd.VAE from the "vae" block lists) to encode frames
and decode latents, and loaded its text encoder as LTXAVTextEncoderLoader does (comfy.sd.load_clip with the Gemma
3 file and the checkpoint) to tokenize and encode prompts. ComfyUI ran with PyTorch attention
(--use-pytorch-cross-attention). The files are built here again (same seed, same bytes: the fixture's sha256 says so)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_ltx2.json.xz")
ATOL = 1e-5
# The text conditioning passes two connectors over 1024 register-padded tokens: the attention's and the split
# RoPE's float32 roundings (ComfyUI's own kernels, not diffusers') leave up to 1.5e-5 on values of size 1.
TEXT_ATOL = 5e-5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ltx2") / "models"
    build_demo_ltx2(root)
    return root / FILES["checkpoint"]


@pytest.fixture(scope="module")
def model(checkpoint):
    return loader.load_diffusion_model(make_ref("diffusion_model", "ltx2", [checkpoint]))


@pytest.fixture(scope="module")
def gemma(checkpoint) -> Path:
    return checkpoint.parents[1] / FILES["text_encoder"]


def test_demo_files_are_the_recorded_ones(checkpoint, gemma) -> None:
    assert hashlib.sha256(checkpoint.read_bytes()).hexdigest() == FIXTURE["sha256"], (
        f"{FILES['checkpoint']} changed: re-record tests/models/fixtures/comfyui_ltx2.json.xz"
    )
    assert hashlib.sha256(gemma.read_bytes()).hexdigest() == FIXTURE["text_encoder_sha256"]


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
    sigma = torch.tensor(case["sigma"])
    ms = model_sampling_from_config(model.sampling)
    x = pack([video, audio])
    t = ms.timestep(sigma)
    if "denoise_mask" in case:  # the kept frame's mask, packed as the samplers pack it (audio all ones)
        mask = tensor(case["denoise_mask"]).expand(-1, video.shape[1], -1, -1, -1)
        t = model.step_timesteps(t, pack([mask, torch.ones_like(audio)]))
    with torch.no_grad():
        denoised = ms.calculate_denoised(sigma, model.apply(ms.calculate_input(sigma, x), t, cond), x)
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
    batch, frames, *pixels = case["image"]["shape"]
    got = vae.decode(tensor(case["latent"]))
    assert list(got.shape) == [batch * frames, *pixels]
    torch.testing.assert_close(at_recorded(got.reshape(batch, frames, *pixels), case["image"]), want, atol=ATOL, rtol=0)


def test_vae_refuses_bad_frame_counts_and_shapes(vae) -> None:
    with pytest.raises(ValueError, match="1 \\+ 8k frames"):
        vae.encode(torch.rand(4, 64, 64, 3))
    with pytest.raises(ValueError, match="128, frames, height, width"):
        vae.decode(torch.randn(1, 16, 2, 2))


@pytest.fixture(scope="module")
def text_encoder(checkpoint, gemma):
    return loader.load_text_encoder(make_ref("text_encoder", "ltx2", [gemma, checkpoint], clip_type="ltxv"))


@pytest.mark.parametrize("index", range(len(FIXTURE["text"])))
def test_tokens_and_conditioning_equal_comfyuis(text_encoder, index: int) -> None:
    """The empty prompt (<bos> alone) and two sentences: ids, then the [1, 1024, video + audio] conditioning."""
    torch.set_num_threads(1)
    rec = FIXTURE["text"][index]
    tokens = text_encoder.tokenize(rec["prompt"])
    assert [t for t, _ in tokens["gemma3_12b"][0]] == rec["ids"]
    cond, pooled = text_encoder.encode(tokens)
    assert pooled is None and cond.shape == (1, 1024, 64)
    torch.testing.assert_close(at_recorded(cond, rec["cond"]), tensor(rec["cond"]), atol=TEXT_ATOL, rtol=0)


def test_prompts_give_different_conditioning(text_encoder) -> None:
    a, _ = text_encoder.encode(text_encoder.tokenize("a red fox running through fresh snow"))
    b, _ = text_encoder.encode(text_encoder.tokenize("a cat playing piano"))
    assert (a - b).abs().max() > 0.1


def test_gemma_file_is_detected_and_needs_its_checkpoint(checkpoint, gemma) -> None:
    assert probe(gemma).arch == "gemma3"
    with pytest.raises(ModelLoadError, match="LTXAVTextEncoderLoader"):
        loader.load_text_encoder(make_ref("text_encoder", "ltx2", [gemma], clip_type="ltxv"))


def test_prompt_weights_are_text_as_in_the_newest_comfyui(checkpoint, gemma) -> None:
    """Its Gemma 3 tokenizer disables weights: `(red:1.3)` and `(fox)` are read as written, `\\(` as `(`."""
    enc = loader.load_text_encoder(make_ref("text_encoder", "ltx2", [gemma, checkpoint], clip_type="ltxv"))
    [chunk] = enc.tokenize("a (red:1.3) \\(fox\\)")["gemma3_12b"]
    assert chunk == [(2, 1.0)] + [(t, 1.0) for t in enc.tokenizer("a (red:1.3) (fox)")]
    cond, _ = enc.encode({"gemma3_12b": [chunk]})
    assert torch.isfinite(cond).all()


def test_gemma_without_its_tokenizer_is_refused(checkpoint, gemma, tmp_path) -> None:
    path = tmp_path / "gemma_no_tokenizer.safetensors"
    save_file({k: v for k, v in load_file(gemma).items() if k != "spiece_model"}, str(path))
    with pytest.raises(ModelLoadError, match="spiece_model"):
        loader.load_text_encoder(make_ref("text_encoder", "ltx2", [path, checkpoint], clip_type="ltxv"))


def test_ltxav_text_encoder_loader_node(checkpoint, gemma, tmp_path) -> None:
    """The node takes the Gemma file from text_encoders and the checkpoint from checkpoints, as ComfyUI's does."""
    from nodes.library.ltxv_audio import LTXAVTextEncoderLoader
    from nodes.workspace import Workspace, activate, active

    previous = active()
    ws = activate(Workspace(tmp_path / "ws").create())
    try:
        for folder, src in (("text_encoders", gemma), ("checkpoints", checkpoint)):
            (ws.models_dir / folder).mkdir(parents=True, exist_ok=True)
            (ws.models_dir / folder / src.name).symlink_to(src)
        (ref,) = LTXAVTextEncoderLoader().execute(gemma.name, checkpoint.name)
        assert (ref.component, ref.option("clip_type")) == ("text_encoder", "ltxv")
        assert [Path(p).name for p in ref.sources] == [gemma.name, checkpoint.name]
        with pytest.raises(FileNotFoundError, match="text_encoder: 'missing.safetensors'"):
            LTXAVTextEncoderLoader().execute("missing.safetensors", checkpoint.name)
    finally:
        activate(previous)


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
