"""Wan 2.1 / 2.2 support checked against ComfyUI on wan-tiny's files.

tests/models/fixtures/comfyui_wan.json.xz was recorded by scripts/record_comfyui_wan.py (upstream ComfyUI 0.10.0)
from the files nodes.models.wan_demo writes, loaded by ComfyUI's UNETLoader, CLIPLoader (type wan) and
VAELoader: the umt5 tokenizer's ids and conditioning, each diffusion model's raw output, one denoising
evaluation of the image-to-video model through ComfyUI's model (concat included), the VAE's video encode and
decode, and the latent nodes' outputs. The files are built here again (same seed, same bytes: the fixture's
sha256 says so). The template workflow's frames are compared in tests/e2e/test_wan_workflow.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.arch import latent_format, sampling_config
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.wan_demo import FILES as WAN_FILES
from nodes.models.wan_demo import build_demo_wan, tiny_wan_state_dicts
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.recorded_tensors import load_json, tensor

# wan-tiny's files and the demo CLIP vision model that Wan 2.1 image-to-video reads
FILES = {**WAN_FILES, "clip_vision": "clip_vision/clip-vision-tiny.safetensors"}
FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan.json.xz")
ATOL, RTOL = 2e-5, 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    from nodes.models.demo import _clip_vision, save_tiny

    root = tmp_path_factory.mktemp("wan") / "models"
    build_demo_wan(root)
    save_tiny(_clip_vision(), root / FILES["clip_vision"])
    return root


def path_of(models: Path, part: str) -> Path:
    return models / FILES[part]


def diffusion_model(models: Path, part: str):
    return loader.load_diffusion_model(
        make_ref("diffusion_model", probe(path_of(models, part)).arch, [path_of(models, part)])
    )


@pytest.fixture(scope="module")
def text_encoder(models):
    return loader.load_text_encoder(
        make_ref("text_encoder", "wan21", [path_of(models, "text_encoder")], clip_type="wan")
    )


@pytest.fixture(scope="module")
def vae(models):
    return loader.load_vae(make_ref("vae", "qwen_image", [path_of(models, "vae")]))


def test_demo_files_are_the_recorded_ones(models) -> None:
    for part, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256(path_of(models, part).read_bytes()).hexdigest() == rec["sha256"], (
            f"{FILES[part]} changed: re-record tests/models/fixtures/comfyui_wan.json.xz"
        )


def test_files_have_comfyuis_key_layouts_and_are_detected(models) -> None:
    sds = tiny_wan_state_dicts()
    assert {
        "head.modulation",
        "head.head.weight",
        "patch_embedding.weight",
        "blocks.1.self_attn.norm_q.weight",
        "blocks.0.cross_attn.o.weight",
        "blocks.0.norm3.weight",
        "blocks.0.modulation",
        "time_projection.1.weight",
        "text_embedding.2.weight",
    } <= set(sds["i2v_high"])
    assert {
        "spiece_model",
        "shared.weight",
        "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight",
        "encoder.final_layer_norm.weight",
    } <= set(sds["text_encoder"])
    assert "diffusion_model.blocks.0.self_attn.q.lora_down.weight" in sds["lora_high"]
    found = {
        part: (probe(path_of(models, part)).arch, probe(path_of(models, part)).kind)
        for part in ("i2v_high", "t2v", "ti2v_5b", "text_encoder", "vae", "vae22")
    }
    assert found == {
        "i2v_high": ("wan21", "diffusion_model"),
        "t2v": ("wan21", "diffusion_model"),
        "ti2v_5b": ("wan22_5b", "diffusion_model"),
        "text_encoder": ("umt5", "text_encoder"),
        "vae": ("qwen_image", "vae"),
        "vae22": ("wan22_5b", "vae"),
    }


def test_hyperparameters_are_read_from_the_shapes(models) -> None:
    image = diffusion_model(models, "i2v_21").config  # Wan 2.1 i2v: CLIP vision states join the text
    assert (image["image_dim"], image["added_kv_proj_dim"]) == (32, 128)
    cfg = diffusion_model(models, "i2v_high").config
    assert (
        cfg["num_layers"],
        cfg["num_attention_heads"],
        cfg["attention_head_dim"],
        cfg["text_dim"],
        cfg["in_channels"],
        cfg["out_channels"],
        cfg["ffn_dim"],
    ) == (2, 1, 128, 32, 36, 16, 256)
    five = diffusion_model(models, "ti2v_5b")
    assert (five.config["in_channels"], five.latent_format.channels) == (48, 48)


def test_prefixed_diffusion_model_loads(models, tmp_path) -> None:
    """ComfyUI's all-in-one prefix `model.diffusion_model.`."""
    path = tmp_path / "wan_prefixed.safetensors"
    save_file({"model.diffusion_model." + k: v for k, v in tiny_wan_state_dicts()["t2v"].items()}, str(path))
    assert probe(path).arch == "wan21"
    assert loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [path])).config["num_layers"] == 2


def test_umt5_without_its_tokenizer_is_refused(models, tmp_path) -> None:
    sd = {k: v for k, v in tiny_wan_state_dicts()["text_encoder"].items() if k != "spiece_model"}
    path = tmp_path / "umt5_no_tokenizer.safetensors"
    save_file(sd, str(path))
    with pytest.raises(ModelLoadError, match="spiece_model"):
        loader.load_text_encoder(make_ref("text_encoder", "wan21", [path], clip_type="wan"))


@pytest.mark.parametrize("name", sorted(FIXTURE["text"]))
def test_tokens_and_conditioning_equal_comfyuis(text_encoder, name: str) -> None:
    rec = FIXTURE["text"][name]
    tokens = text_encoder.tokenize(rec["prompt"])
    assert [t for t, _ in tokens["umt5xxl"][0]] == rec["ids"]
    cond, pooled = text_encoder.encode(tokens)
    assert pooled is None and rec["pooled_is_none"]
    torch.testing.assert_close(cond, tensor(rec["cond"]), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("index", range(len(FIXTURE["transformer"])))
def test_forward_equals_comfyuis(models, index: int) -> None:
    """Raw outputs: odd sizes (circular padding), a batch of two timesteps, Wan 2.2 5B's per-frame timesteps."""
    case = FIXTURE["transformer"][index]
    model = diffusion_model(models, case["model"])
    x = tensor(case["x"])
    cond = {"context": tensor(case["context"])}
    if model.config["in_channels"] != x.shape[1]:  # an i2v model given its concat channels in x, as recorded
        cond["concat"], x = x[:, 16:], x[:, :16]
    out = model.apply(x, torch.tensor(case["t"]), cond)
    torch.testing.assert_close(out, tensor(case["out"]), atol=ATOL, rtol=RTOL)


def test_one_image_to_video_step_equals_comfyuis(models, vae) -> None:
    """WanImageToVideo's conditioning through the model: ComfyUI's concat (1 - mask in four channels, the image
    latent in model space) and its flow model sampling (shift 8) to the denoised prediction."""
    rec = FIXTURE["i2v_step"]
    model = diffusion_model(models, "i2v_high")
    x, sigma = tensor(rec["x"]), torch.tensor([rec["sigma"]])
    image_latent = vae.encode_video(_i2v_clip(tensor(rec["image"]), 48, 32, 9))
    mask = torch.ones(1, 1, x.shape[2], x.shape[-2], x.shape[-1])
    mask[:, :, :1] = 0.0
    concat = model.concat_image(image_latent, x, mask)
    torch.testing.assert_close(concat, tensor(rec["concat"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    out = model.apply(
        ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": tensor(rec["context"]), "concat": concat}
    )
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(rec["denoised"]), atol=ATOL, rtol=RTOL)


def test_one_masked_wan22_5b_step_equals_comfyuis(models) -> None:
    """Wan 2.2 5B under a noise mask keeping the first latent frame: ComfyUI's per-frame timesteps (that frame
    at 0), through the flow model sampling to the denoised prediction."""
    rec = FIXTURE["ti2v_step"]
    model = diffusion_model(models, "ti2v_5b")
    x, mask, sigma = tensor(rec["x"]), tensor(rec["mask"]), torch.tensor([rec["sigma"]])
    ms = model_sampling_from_config(sampling_config("wan22_5b"))
    t = model.step_timesteps(ms.timestep(sigma).reshape(-1), mask)
    assert t.shape == (1, 3) and float(t[0, 0]) == 0.0
    out = model.apply(ms.calculate_input(sigma, x), t, {"context": tensor(rec["context"])})
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(rec["denoised"]), atol=ATOL, rtol=RTOL)


def _i2v_clip(image: torch.Tensor, width: int, height: int, length: int) -> torch.Tensor:
    from nodes.library.wan import fit_frames

    start = fit_frames(image[:length], width, height)
    clip = torch.full((length, height, width, 3), 0.5)
    clip[: start.shape[0]] = start
    return clip


def test_vae_video_encode_and_decode_equal_comfyuis(vae) -> None:
    rec = FIXTURE["vae"]
    torch.testing.assert_close(vae.encode_video(tensor(rec["video"])), tensor(rec["encoded"]), atol=ATOL, rtol=RTOL)
    decoded = tensor(rec["decoded"])  # ComfyUI's VAE gives [B,T,H,W,3]; its VAEDecode node makes it [B*T,H,W,3]
    torch.testing.assert_close(
        vae.decode(tensor(rec["latent"])), decoded.reshape(-1, *decoded.shape[2:]), atol=ATOL, rtol=RTOL
    )


def test_wan22_vae_video_encode_and_decode_equal_comfyuis(models) -> None:
    """The Wan 2.2 VAE (48 channels, 1/16) in Wan's layout, mapped onto AutoencoderKLWan's names here."""
    vae22 = loader.load_vae(make_ref("vae", "wan22_5b", [path_of(models, "vae22")]))
    assert (vae22.latent_channels, vae22.downscale) == (48, 16)
    rec = FIXTURE["vae22"]
    torch.testing.assert_close(vae22.encode_video(tensor(rec["video"])), tensor(rec["encoded"]), atol=ATOL, rtol=RTOL)
    decoded = tensor(rec["decoded"])
    torch.testing.assert_close(
        vae22.decode(tensor(rec["latent"])), decoded.reshape(-1, *decoded.shape[2:]), atol=ATOL, rtol=RTOL
    )


def test_latent_formats_and_sampling_are_comfyuis() -> None:
    assert latent_format("wan21").channels == 16 and latent_format("wan22_5b").channels == 48
    assert sampling_config("wan21") == {"kind": "flow", "shift": 8.0, "multiplier": 1000}


def _run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def wan_workspace(models, tmp_path_factory):
    """An active workspace holding wan-tiny, whose ModelFns run in-process."""
    import shutil

    from nodes import workspace as ws_module

    previous = ws_module._active
    ws = ws_module.activate(ws_module.Workspace(tmp_path_factory.mktemp("wan-ws")).create())
    for sub in models.iterdir():
        shutil.copytree(sub, ws.models_dir / sub.name, dirs_exist_ok=True)
    yield ws
    ws_module._active = previous


def test_latent_nodes_equal_comfyuis(wan_workspace, vae) -> None:
    from nodes.library.wan import (
        EmptyHunyuanLatentVideo,
        Wan22ImageToVideoLatent,
        WanFirstLastFrameToVideo,
        WanImageToVideo,
    )

    rec = FIXTURE["latent_nodes"]
    for case in rec["empty_hunyuan"]:
        (latent,) = EmptyHunyuanLatentVideo().execute(*case["args"])
        assert list(latent["samples"].shape) == case["shape"] and not latent["samples"].any()
    vae_ref = make_ref("vae", "qwen_image", [wan_workspace.models_dir / FILES["vae"]])
    cond = [[torch.zeros(1, 512, 32), {}]]
    start, end = tensor(rec["start_image"]), tensor(rec["end_image"])
    pos, neg, latent = _run(WanImageToVideo().execute(cond, cond, vae_ref, 48, 32, 13, 2, start_image=start))
    assert list(latent["samples"].shape) == rec["wan_i2v"]["latent_shape"]
    for opts in (pos[0][1], neg[0][1]):
        torch.testing.assert_close(
            opts["concat_latent_image"], tensor(rec["wan_i2v"]["concat_latent_image"]), atol=ATOL, rtol=RTOL
        )
        torch.testing.assert_close(opts["concat_mask"], tensor(rec["wan_i2v"]["concat_mask"]))
    pos, _, latent = _run(
        WanFirstLastFrameToVideo().execute(cond, cond, vae_ref, 32, 32, 9, 1, start_image=start, end_image=end)
    )
    assert list(latent["samples"].shape) == rec["wan_flf"]["latent_shape"]
    torch.testing.assert_close(
        pos[0][1]["concat_latent_image"], tensor(rec["wan_flf"]["concat_latent_image"]), atol=ATOL, rtol=RTOL
    )
    torch.testing.assert_close(pos[0][1]["concat_mask"], tensor(rec["wan_flf"]["concat_mask"]))
    (latent,) = _run(Wan22ImageToVideoLatent().execute(vae_ref, 96, 64, 9, 3))
    assert (
        list(latent["samples"].shape) == rec["wan22_latent"]["shape"] and sorted(latent) == rec["wan22_latent"]["keys"]
    )
    vae22_ref = make_ref("vae", "wan22_5b", [wan_workspace.models_dir / FILES["vae22"]])
    (latent,) = _run(Wan22ImageToVideoLatent().execute(vae22_ref, 96, 64, 9, 2, start_image=start))
    rec22 = rec["wan22_latent_start"]
    torch.testing.assert_close(latent["samples"], tensor(rec22["samples"]), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(latent["noise_mask"], tensor(rec22["noise_mask"]))
    with pytest.raises(ValueError, match="Wan 2.2 VAE"):  # the Wan 2.1 VAE gives 16 channels, not 48
        _run(Wan22ImageToVideoLatent().execute(vae_ref, 96, 64, 9, 1, start_image=start))


def test_image_to_video_refuses_another_vae(wan_workspace, tmp_path) -> None:
    from nodes.library.wan import WanImageToVideo

    sd1_vae = make_ref("vae", "sd1", [wan_workspace.models_dir / FILES["vae"]])
    cond = [[torch.zeros(1, 512, 32), {}]]
    with pytest.raises(ValueError, match="Wan 2.1 VAE"):
        _run(WanImageToVideo().execute(cond, cond, sd1_vae, 32, 32, 5, 1, start_image=torch.rand(1, 32, 32, 3)))


ANCESTRAL = json.loads((Path(__file__).parent / "fixtures" / "comfyui_wan_ancestral.json").read_text())


@pytest.mark.parametrize(
    "case", ANCESTRAL["cases"], ids=[f"{c['sampler']}-{c['seed']}-b{c['size'][3]}" for c in ANCESTRAL["cases"]]
)
def test_ksampler_with_per_step_noise_equals_comfyuis(wan_workspace, fixed_threads, case: dict) -> None:
    """KSampler on the text-to-video model (ModelSamplingSD3, shift 5) with the samplers that draw noise at every
    step, and euler as control, gives ComfyUI 0.10.0's latent (scripts/record_comfyui_wan_ancestral.py). On the
    CPU ComfyUI seeds the per-step Gaussian noise with seed + 1: with the seed itself the first ancestral draw
    repeats the initial noise and the latent moves by whole units."""
    from nodes.library.model_advanced import ModelSamplingSD3
    from nodes.library.wan import EmptyHunyuanLatentVideo
    from nodes.loaders import UNETLoader
    from nodes.model_nodes import KSampler

    recorded_file = wan_workspace.models_dir / ANCESTRAL["file"]["path"]
    assert hashlib.sha256(recorded_file.read_bytes()).hexdigest() == ANCESTRAL["file"]["sha256"]
    (unet,) = UNETLoader().load_unet(Path(FILES["t2v"]).name, "default")
    (model,) = ModelSamplingSD3().patch(unet, 5.0)
    (latent,) = EmptyHunyuanLatentVideo().execute(*case["size"])
    pos, neg = [[tensor(ANCESTRAL["positive"]), {}]], [[tensor(ANCESTRAL["negative"]), {}]]
    (out,) = _run(
        KSampler().sample(model, case["seed"], case["steps"], 3.5, case["sampler"], "simple", pos, neg, latent)
    )
    torch.testing.assert_close(out["samples"], tensor(case["samples"]), atol=ATOL, rtol=RTOL)
