"""unCLIP (issue 38): SD2.1 unCLIP checkpoints told from SDXL by their layout, their image encoder loaded from the
checkpoint, the noise-augmented image embedding as the UNet's ADM input (SD2.1 unCLIP) or SDXL's pooled slot
(revision), and one UNet evaluation each, equal to ComfyUI 0.3.64 on the demo's tiny files (fixture from
scripts/record_comfyui_unclip.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.conditioning import flatten
from nodes.library.clip_vision import ClipVisionOutput
from nodes.library.unclip import unCLIPConditioning
from nodes.modelfns.denoise import DenoiseParams, GuidedDenoiser
from nodes.models import unclip
from nodes.models.clip_vision import load_clip_vision
from nodes.models.detect import probe
from nodes.models.loader import load_diffusion_model
from nodes.models.safetensors_io import load_state_dict
from nodes.models.unclip_demo import build_demo_unclip
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_unclip.json").read_text())
SD21 = "checkpoints/sd21-unclip-tiny.safetensors"
SDXL = "checkpoints/sdxl-revision-tiny.safetensors"
VISION_G = "clip_vision/clip-vision-g-tiny.safetensors"


def images() -> dict[str, torch.Tensor]:
    """The recorder's fixed images."""
    gen = torch.Generator().manual_seed(2024)
    a, b = torch.rand(1, 96, 80, 3, generator=gen), torch.rand(1, 64, 128, 3, generator=gen)
    return {"a": a, "b": b, "ab": torch.cat([a[:, :64, :80], b[:, :, :80]])}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("models")
    build_demo_unclip(root)
    for name, digest in FIXTURE["sha256"].items():
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == digest, name
    return root


def _ref(component: str, arch: str, path: Path) -> ModelRef:
    return ModelRef(component, arch, (str(path),), (file_digest(path),))


def _embeds(path: Path) -> dict[str, torch.Tensor]:
    encoder = load_clip_vision(load_state_dict(str(path)), str(path))
    with torch.no_grad():
        return {name: encoder.encode(image, True)["image_embeds"] for name, image in images().items()}


def _cond(model, case: dict, embeds: dict, pooled: torch.Tensor | None) -> dict:
    """What the denoising step gives the UNet for the case's unCLIPConditioning chain."""
    context = tensor(case["context"])
    conditioning = [[context, {} if pooled is None else {"pooled_output": pooled}]]
    for image, strength, noise in case["chain"]:
        output = ClipVisionOutput(torch.zeros(1), embeds[image], torch.zeros(1))
        (conditioning,) = unCLIPConditioning().apply_adm(conditioning, output, strength, noise)
    inputs, entries = flatten("positive", conditioning, lambda p: 1.0)
    h, w = case["latent_hw"]
    params = DenoiseParams(
        sampler="euler", seed=case["seed"], cfg=1.0, model_sampling={}, positive=entries, image_size=(h * 8, w * 8)
    )
    cond = GuidedDenoiser(model, None, inputs, params, load_control=None)._batch_cond(entries, 1, torch.device("cpu"))
    return cond | {"context": context}


def _denoised(model, case: dict, cond: dict) -> torch.Tensor:
    ms = model_sampling_from_config(model.sampling)
    sigma, x = torch.tensor([case["sigma"]]), tensor(case["x"])
    with torch.no_grad():
        eps = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
    return ms.calculate_denoised(sigma, eps, x)


def test_layouts_are_detected(models):
    sd21 = probe(models / SD21)
    assert (sd21.arch, sd21.kind) == ("sd2", "checkpoint")
    assert "clip_vision" in sd21.components
    assert probe(models / SDXL).arch == "sdxl"
    # ComfyUI's published sizes (supported_models.SD21UnclipL / H; SDXL base), for a bare UNet without the encoder
    width = {"attn2.to_k.weight": (320, 1024)}
    assert unclip.is_sd21_unclip({"label_emb.0.0.weight": (1280, 2048), **width}, "")
    assert unclip.is_sd21_unclip({"label_emb.0.0.weight": (1280, 1536), **width}, "")
    assert not unclip.is_sd21_unclip({"label_emb.0.0.weight": (1280, 2816), "attn2.to_k.weight": (640, 2048)}, "")
    assert FIXTURE["sd21_unet_config"] == {"context_dim": 32, "adm_in_channels": 64}


@pytest.mark.parametrize("case", FIXTURE["sd21"], ids=lambda c: c["name"])
def test_sd21_unclip_equals_comfyui(models, case):
    model = load_diffusion_model(_ref("diffusion_model", "sd2", models / SD21))
    embeds = _embeds(models / SD21)  # the checkpoint's own image encoder (unCLIPCheckpointLoader's CLIP_VISION)
    for image, _, _ in case["chain"]:
        assert torch.allclose(embeds[image], tensor(case["image_embeds"][image]), atol=1e-5)
    cond = _cond(model, case, embeds, None)
    if case["chain"]:
        assert torch.allclose(cond["adm"], tensor(case["adm"]), atol=1e-5)
    else:
        assert "adm" not in cond and not tensor(case["adm"]).any()  # zeros, as the UNet takes without images
    assert torch.allclose(_denoised(model, case, cond), tensor(case["denoised"]), atol=1e-5)


@pytest.mark.parametrize("case", FIXTURE["sdxl"], ids=lambda c: c["name"])
def test_sdxl_revision_equals_comfyui(models, case):
    model = load_diffusion_model(_ref("diffusion_model", "sdxl", models / SDXL))
    embeds = _embeds(models / VISION_G)
    cond = _cond(model, case, embeds, tensor(FIXTURE["sdxl_pooled"]))
    adm = tensor(case["adm"])
    assert torch.allclose(cond["pooled"], adm[:, :1280], atol=1e-5)
    time_embeds = model.module.add_time_proj(cond["time_ids"].flatten()).reshape(1, -1)
    assert torch.allclose(time_embeds, adm[:, 1280:], atol=1e-5)
    assert torch.allclose(_denoised(model, case, cond), tensor(case["denoised"]), atol=1e-5)


def test_an_embedding_of_another_width_is_named(models):
    embeds = {"a": torch.zeros(1, 32)}
    model = load_diffusion_model(_ref("diffusion_model", "sdxl", models / SDXL))
    case = {**FIXTURE["sdxl"][0], "chain": [["a", 1.0, 0.0]]}
    with pytest.raises(ValueError, match="1280-wide CLIP vision image embeddings, got shape \\(1, 32\\)"):
        _cond(model, case, embeds, tensor(FIXTURE["sdxl_pooled"]))


def test_conditioning_node_appends_and_zero_strength_passes_through():
    cond = [[torch.zeros(1, 77, 32), {"pooled_output": torch.zeros(1, 32)}]]
    output = ClipVisionOutput(torch.zeros(1), torch.ones(1, 32), torch.zeros(1))
    assert unCLIPConditioning().apply_adm(cond, output, 0.0, 0.3)[0] is cond
    (once,) = unCLIPConditioning().apply_adm(cond, output, 0.5, 0.3)
    (twice,) = unCLIPConditioning().apply_adm(once, output, 2.0, 0.0)
    assert [i["strength"] for i in twice[0][1]["unclip_conditioning"]] == [0.5, 2.0]
    assert "unclip_conditioning" not in cond[0][1]  # the input is left as it was
    with pytest.raises(ValueError, match="clip_vision_output"):
        unCLIPConditioning().apply_adm(cond, "not an output", 1.0, 0.0)


def test_checkpoint_loader_hands_out_the_image_encoder_and_names_a_file_without_one(tmp_path):
    from nodes import workspace as ws_module
    from nodes.library.unclip import unCLIPCheckpointLoader
    from nodes.models.demo import save_tiny
    from nodes.models.unclip_demo import sd21_unclip_checkpoint

    before = ws_module.active()
    ws = ws_module.activate(ws_module.Workspace(tmp_path / "ws").create())
    try:
        full = sd21_unclip_checkpoint()
        save_tiny(full, ws.models_dir / "checkpoints" / "unclip.safetensors")
        without = {k: v for k, v in full.items() if not k.startswith("embedder.")}
        save_tiny(without, ws.models_dir / "checkpoints" / "no-vision.safetensors")
        model, clip, vae, vision = unCLIPCheckpointLoader().load_checkpoint("unclip.safetensors")
        assert (model.arch, vision.component, vision.sources) == ("sd2", "clip_vision", model.sources)
        assert clip is not None and vae is not None
        with pytest.raises(ValueError, match="ckpt_name: 'no-vision.safetensors' holds no CLIP vision model"):
            unCLIPCheckpointLoader().load_checkpoint("no-vision.safetensors")
    finally:
        ws_module.activate(before)
