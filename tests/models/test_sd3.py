"""SD3 (MMDiT) support checked against ComfyUI 0.3.64 on the tiny demo SD3's weights.

tests/nodes/fixtures/comfyui_sd3.json.xz was recorded by scripts/record_comfyui_sd3.py (ComfyUI commit a125cd84)
from the files nodes.models.sd3_demo writes: its MMDiT class on the checkpoint's weights, its SD3ClipModel
combining its CLIP-L/CLIP-G/T5 encoders loaded with the tiny weights, and its SD3 model sampling."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodes.arch import sampling_config
from nodes.library.sd3 import ControlNetApplySD3
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.components import SD3_LATENT
from nodes.models.controlnet import resize_hint
from nodes.models.sd3_demo import build_demo_sd3, tiny_sd3_state_dicts
from nodes.models.sd3_keys import diffusers_to_mmdit, mmdit_to_diffusers
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parents[1] / "nodes" / "fixtures" / "comfyui_sd3.json.xz")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sd3") / "models"
    build_demo_sd3(root)
    return root


@pytest.fixture(scope="module")
def mmdit(models):
    ckpt = models / "checkpoints/sd3-tiny.safetensors"
    return loader.load_diffusion_model(make_ref("diffusion_model", "sd3", [ckpt]))


def inputs(case: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # The recording script's draws, in its order.
    g = torch.Generator().manual_seed(case["seed"])
    shape = case["shape"]
    return (
        torch.randn(shape, generator=g),
        torch.randn(shape[0], case["tokens"], 4096, generator=g),
        torch.randn(shape[0], 80, generator=g),
    )


def test_key_layout_round_trips() -> None:
    sd = tiny_sd3_state_dicts()["mmdit"]
    back = diffusers_to_mmdit(mmdit_to_diffusers(sd))
    assert sorted(back) == sorted(sd)
    assert all(torch.equal(back[k], sd[k]) for k in sd)


def test_unknown_mmdit_weights_are_refused() -> None:
    sd = {**tiny_sd3_state_dicts()["mmdit"], "joint_blocks.0.x_block.extra.weight": torch.zeros(1)}
    with pytest.raises(ValueError, match="extra"):
        mmdit_to_diffusers(sd)


@pytest.mark.parametrize("index", range(len(FIXTURE["mmdit"])))
def test_forward_equals_comfyui_mmdit(mmdit, index: int) -> None:
    case = FIXTURE["mmdit"][index]
    x, context, y = inputs(case)
    out = mmdit.apply(x, torch.tensor(case["timesteps"]), {"context": context, "pooled": y})
    torch.testing.assert_close(out, tensor(case["out"]), atol=2e-5, rtol=1e-4)


def test_sd3_sampling_equals_comfyui() -> None:
    rec = FIXTURE["sampling"]
    ms = model_sampling_from_config(sampling_config("sd3"))
    assert float(ms.sigma_max) == pytest.approx(rec["sigma_max"], abs=1e-7)
    assert float(ms.sigma_min) == pytest.approx(rec["sigma_min"], abs=1e-7)
    torch.testing.assert_close(ms.timestep(torch.tensor(rec["sigmas"])).float(), torch.tensor(rec["timesteps"]))
    for p, sigma in rec["percent_to_sigma"].items():
        assert float(ms.percent_to_sigma(float(p))) == pytest.approx(sigma, abs=1e-6)


@pytest.fixture(scope="module")
def text_encoder(models):
    return loader.load_text_encoder(make_ref("text_encoder", "sd3", [models / "checkpoints/sd3-tiny.safetensors"]))


@pytest.mark.parametrize("name", sorted(FIXTURE["text"]))
def test_text_encoding_equals_comfyui_sd3_clip(models, text_encoder, name: str) -> None:
    rec = FIXTURE["text"][name]
    tokens = {k: [[(int(t), float(w)) for t, w in chunk] for chunk in v] for k, v in rec["tokens"].items()}
    if "layer" in rec:  # CLIPSetLastLayer
        text_encoder = loader.load_text_encoder(
            make_ref("text_encoder", "sd3", [models / "checkpoints/sd3-tiny.safetensors"], layer=rec["layer"])
        )
    cond, pooled = text_encoder.encode(tokens)
    assert list(cond.shape) == rec["shape"]
    expected = tensor(rec["pooled"])
    if not expected.any():
        # No CLIP tokens: ComfyUI's zeros have the real CLIPs' width 768 + 1280, ours the tiny CLIPs' 32 + 48.
        assert expected.shape == (1, 2048) and pooled.shape == (1, 80) and not pooled.any()
    else:
        torch.testing.assert_close(pooled, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cond[..., :96], tensor(rec["head"]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cond[..., -64:], tensor(rec["tail"]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cond.double().sum(-1), tensor(rec["row_sums"]).double(), atol=1e-3, rtol=1e-5)


def test_text_encoder_files_in_any_order_equal_the_checkpoint(models, text_encoder) -> None:
    te = models / "text_encoders"
    files = [te / "sd3-tiny-t5.safetensors", te / "sd3-tiny-clip_g.safetensors", te / "sd3-tiny-clip_l.safetensors"]
    triple = loader.load_text_encoder(make_ref("text_encoder", "sd3", files, clip_type="sd3"))
    tokens = text_encoder.tokenize("a (red:1.2) cube on a table")
    assert triple.tokenize("a (red:1.2) cube on a table") == tokens
    for a, b in zip(triple.encode(tokens), text_encoder.encode(tokens)):
        assert torch.equal(a, b)


def test_clips_without_t5_leave_t5_out(models, text_encoder) -> None:
    te = models / "text_encoders"
    dual = loader.load_text_encoder(
        make_ref(
            "text_encoder",
            "sd3",
            [te / "sd3-tiny-clip_l.safetensors", te / "sd3-tiny-clip_g.safetensors"],
            clip_type="sd3",
        )
    )
    tokens = text_encoder.tokenize("a cube")
    cond, pooled = dual.encode(tokens)
    full, full_pooled = text_encoder.encode(tokens)
    assert cond.shape[1] == 77 and torch.equal(cond, full[:, :77]) and torch.equal(pooled, full_pooled)


@pytest.mark.parametrize("index", range(len(FIXTURE["mmdit"])))
@pytest.mark.parametrize("block", [0, 1])
def test_skipped_joint_block_equals_comfyui(mmdit, index: int, block: int) -> None:
    """SkipLayerGuidanceSD3's extra prediction: a joint block swapped for a pass-through (the dit_replace
    network patch) on our MMDiT equals ComfyUI's MMDiT with the same patches_replace entry."""
    from nodes.library.slg import skips
    from nodes.modelfns.network_patches import dit_replaced

    case = FIXTURE["mmdit"][index]
    x, context, y = inputs(case)
    with dit_replaced(mmdit.module, skips((block,), ()), {}):
        out = mmdit.apply(x, torch.tensor(case["timesteps"]), {"context": context, "pooled": y})
    torch.testing.assert_close(out, tensor(case["skip_block"][str(block)]), atol=2e-5, rtol=1e-4)
    plain = mmdit.apply(x, torch.tensor(case["timesteps"]), {"context": context, "pooled": y})
    torch.testing.assert_close(plain, tensor(case["out"]), atol=2e-5, rtol=1e-4)  # swapped back


def test_bare_mmdit_file_loads_as_the_checkpoints_model(models, mmdit, tmp_path) -> None:
    """A diffusion_models/ file (UNETLoader): the MMDiT without the checkpoint's prefix and components."""
    from safetensors.torch import save_file

    from nodes.models.detect import probe

    path = tmp_path / "sd3-tiny-mmdit.safetensors"
    save_file(tiny_sd3_state_dicts()["mmdit"], str(path))
    info = probe(path)
    assert (info.arch, info.kind) == ("sd3", "diffusion_model")
    bare = loader.load_diffusion_model(make_ref("diffusion_model", "sd3", [path]))
    case = FIXTURE["mmdit"][1]
    x, context, y = inputs(case)
    cond = {"context": context, "pooled": y}
    t = torch.tensor(case["timesteps"])
    assert torch.equal(bare.apply(x, t, cond), mmdit.apply(x, t, cond))


def test_lora_on_sd3_is_refused(models) -> None:
    from cluster.refs import Patch
    from nodes.models.errors import ModelLoadError

    ref = make_ref("diffusion_model", "sd3", [models / "checkpoints/sd3-tiny.safetensors"])
    with pytest.raises(ModelLoadError, match="LoRA"):
        loader.load_diffusion_model(ref.with_patch(Patch("x.safetensors", "0" * 64, 1.0)))


def test_demo_files_are_byte_identical_when_rebuilt(models, tmp_path) -> None:
    again = build_demo_sd3(tmp_path)
    assert again and all(p.read_bytes() == (models / p.relative_to(tmp_path)).read_bytes() for p in again)


def test_denoised_prediction_equals_comfyui_sd3_model(mmdit) -> None:
    """The whole model as the sampler sees it (input scaling, sigma -> timestep, flow output -> denoised) and the
    SD3 latent format, against ComfyUI's model_base.SD3 on the same weights."""
    rec = FIXTURE["denoised"]
    x, context, y = inputs(rec)
    ms = model_sampling_from_config(mmdit.sampling)
    sigma = torch.tensor([rec["sigma"]])
    out = mmdit.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": context, "pooled": y})
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(rec["denoised"]), atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(mmdit.latent_format.process_in(x), tensor(rec["process_in"]), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(mmdit.latent_format.process_out(x), tensor(rec["process_out"]), atol=1e-6, rtol=1e-6)


@pytest.fixture(scope="module")
def controlnet(models):
    vae = make_ref("vae", "sd3", [models / "checkpoints/sd3-tiny.safetensors"])
    ref = make_ref("controlnet", "sd3", [models / "controlnet/sd3-tiny-controlnet.safetensors"], vae=vae)
    return loader.load_controlnet(ref)


def test_controlnet_equals_comfyui_sd3_controlnet(mmdit, controlnet) -> None:
    """ComfyUI's SD3 ControlNet block outputs (repeated per joint block) and the MMDiT they control."""
    rec = FIXTURE["controlnet"]
    x, context, y = inputs(rec)
    hint = torch.randn(rec["shape"], generator=torch.Generator().manual_seed(rec["hint_seed"]))
    t = torch.tensor(rec["timesteps"])
    control = controlnet.run(x, t, {"context": context}, hint, rec["strength"])
    assert len(control.blocks) == len(rec["outputs"])
    for ours, theirs in zip(control.blocks, rec["outputs"]):
        torch.testing.assert_close(ours, tensor(theirs) * rec["strength"], atol=2e-5, rtol=1e-4)
    out = mmdit.apply(x, t, {"context": context, "pooled": y, "control": control})
    torch.testing.assert_close(out, tensor(rec["controlled"]), atol=2e-5, rtol=1e-4)
    chained = control + control  # ComfyUI's control merge adds chained ControlNets per block
    assert all(torch.equal(c, 2 * b) for c, b in zip(chained.blocks, control.blocks))


def test_controlnet_hint_latent_is_scaled_without_shift(controlnet) -> None:
    rec = FIXTURE["controlnet"]
    z = torch.randn(rec["shape"], generator=torch.Generator().manual_seed(rec["hint_seed"]))
    torch.testing.assert_close(z * SD3_LATENT.scale_factor, tensor(rec["hint_process_in"]), atol=1e-6, rtol=1e-6)
    image = torch.rand(1, 40, 56, 3, generator=torch.Generator().manual_seed(9))
    latent = controlnet.latent_hint(image, 8, 6)
    expected = controlnet.vae.encode(resize_hint(image, 64, 48).movedim(1, -1)) * SD3_LATENT.scale_factor
    assert latent.shape == (1, 16, 8, 6) and torch.equal(latent, expected)


def test_controlnet_without_vae_is_refused(models) -> None:
    from nodes.models.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="needs a VAE"):
        loader.load_controlnet(make_ref("controlnet", "sd3", [models / "controlnet/sd3-tiny-controlnet.safetensors"]))


def test_image_hint_controlnets_refuse_a_vae(models) -> None:
    """ComfyUI VAE-encodes the hint of any ControlNet given a VAE, which SD1/SDXL ControlNets cannot take."""
    cond = [[torch.zeros(1, 77, 32), {}]]
    sd1 = make_ref("controlnet", "sd1", [models / "controlnet/sd3-tiny-controlnet.safetensors"])
    vae = make_ref("vae", "sd3", [models / "checkpoints/sd3-tiny.safetensors"])
    with pytest.raises(ValueError, match="takes image hints"):
        ControlNetApplySD3().apply_controlnet(cond, cond, sd1, vae, torch.zeros(1, 64, 64, 3), 1.0, 0.0, 1.0)
