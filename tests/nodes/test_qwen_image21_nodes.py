"""TextEncodeQwenImage21 and QwenImage21Cache as the newest ComfyUI source declares them (comfy_extras/nodes_qwen.py).

TextEncodeQwenImage21: the prompt and the negative prompt through Qwen-Image 2.1's Qwen3-VL encoder (whose numbers
tests/models/test_qwen_image21.py checks against diffusers' pipeline) and an empty 64-channel latent at 1/16 of
resolution x resolution pixels; reference images (up to 16) resized as the newest ComfyUI node does, read by the
encoder's vision tower (tests/models/test_qwen_image21_images.py checks those numbers against diffusers) and, given
a VAE, added as reference latents whose slots replace the image tokens.

QwenImage21Cache as the newest ComfyUI source declares it (comfy_extras/nodes_qwen.py): a MODEL in, a MODEL out,
`device` auto|gpu|cpu|off and `dtype` default|int8|int4, experimental. No cache is kept here (every step recomputes
the text and reference keys, ComfyUI's lossless off/default), so the model passes through unchanged."""

from __future__ import annotations

import asyncio
import json
from itertools import pairwise
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from cluster.refs import ModelRef
from comfy_bridge.registry import build_registry
from nodes.library.qwen import QwenImage21Cache, TextEncodeQwenImage21
from nodes.loaders import CLIPLoader

MODEL = ModelRef("diffusion_model", "qwen_image21", ("qwen_image_2.1.safetensors",), ("0" * 64,))


def test_object_info_has_todays_interface():
    info = json.loads(json.dumps(build_registry(None, load_custom_nodes=False).node_info("QwenImage21Cache")))
    required = info["input"]["required"]
    assert list(required) == ["model", "device", "dtype"]
    assert required["model"][0] == "MODEL"
    assert (required["device"][1]["options"], required["device"][1]["default"]) == (
        ["auto", "gpu", "cpu", "off"],
        "auto",
    )
    assert (required["dtype"][1]["options"], required["dtype"][1]["default"]) == (
        ["default", "int8", "int4"],
        "default",
    )
    assert (info["output"], info["display_name"], info["category"], info["experimental"]) == (
        ["MODEL"],
        "Qwen Image 2.1 Cache",
        "model/conditioning/qwen image",
        True,
    )
    assert info["python_module"] == "comfy_extras.nodes_qwen"


@pytest.mark.parametrize("device,dtype", [("auto", "default"), ("off", "default"), ("cpu", "int8")])
def test_the_model_passes_through_unchanged(device, dtype):
    assert QwenImage21Cache().execute(MODEL, device, dtype) == (MODEL,)


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="device"):
        QwenImage21Cache().execute(MODEL, "tpu", "default")
    with pytest.raises(ValueError, match="dtype"):
        QwenImage21Cache().execute(MODEL, "auto", "fp8")
    with pytest.raises(ValueError, match="MODEL"):
        QwenImage21Cache().execute("not a model", "auto", "default")


# ---- TextEncodeQwenImage21 --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen3vl_workspace(tmp_path_factory):
    from nodes.workspace import Workspace, activate
    from tests.models.test_qwen_image21 import tiny_qwen3vl

    ws = activate(Workspace(tmp_path_factory.mktemp("ws21")).create())
    folder = Path(ws.folder_paths("text_encoders")[0])
    save_file(
        {k: v.contiguous() for k, v in tiny_qwen3vl().state_dict().items()}, str(folder / "qwen3vl_8b_tiny.safetensors")
    )
    return ws


@pytest.fixture
def clip(qwen3vl_workspace):
    from nodes.workspace import activate

    activate(qwen3vl_workspace)
    return CLIPLoader().load_clip("qwen3vl_8b_tiny.safetensors", "qwen_image")[0]


def test_text_encode_object_info_has_todays_interface():
    info = json.loads(json.dumps(build_registry(None, load_custom_nodes=False).node_info("TextEncodeQwenImage21")))
    required, optional = info["input"]["required"], info["input"]["optional"]
    assert list(required) == ["clip", "prompt", "negative_prompt", "resolution", "images"]
    assert list(optional) == ["vae"]
    assert {k: required["resolution"][1][k] for k in ("default", "min", "max", "step")} == {
        "default": 1024,
        "min": 0,
        "max": 4096,
        "step": 32,
    }
    template = required["images"][1]["template"]
    assert (required["images"][0], template["names"], template["min"]) == (
        "COMFY_AUTOGROW_V3",
        [f"image_{i}" for i in range(1, 17)],
        0,
    )
    assert (info["output"], info["output_name"], info["display_name"]) == (
        ["CONDITIONING", "CONDITIONING", "LATENT"],
        ["positive", "negative", "latent"],
        "Text Encode Qwen Image 2.1",
    )


@pytest.mark.parametrize("resolution,side", [(512, 32), (0, 64), (96, 6)])
def test_both_prompts_are_encoded_and_the_latent_follows_resolution(clip, resolution, side):
    from nodes.models.loader import load_text_encoder

    pos, neg, latent = asyncio.run(TextEncodeQwenImage21().execute(clip, "a red fox", "blurry", resolution))
    te = load_text_encoder(clip)
    for conditioning, text in ((pos, "a red fox"), (neg, "blurry")):
        assert len(conditioning) == 1 and conditioning[0][1]["pooled_output"] is None
        torch.testing.assert_close(conditioning[0][0], te.encode(te.tokenize(text))[0], rtol=0, atol=0)
    assert torch.equal(latent["samples"], torch.zeros(1, 64, side, side))


@pytest.mark.parametrize(
    "size,resolution,expected",
    [
        ((70, 50), 96, (128, 96)),  # ratio 5/7: sqrt(9216 * 5/7) = 81.1 -> 3 x 32, sqrt(9216 * 7/5) = 113.6 -> 4 x 32
        ((768, 1024), 1024, (896, 1184)),  # 886.8 -> 28 x 32, 1182.4 -> 37 x 32
        ((1000, 500), 0, (992, 512)),  # own size: 31.25 -> 31 x 32, 15.6 -> 16 x 32
        ((10, 2000), 512, (32, 7232)),  # 36.2 px rounds to 1 x 32; 7240.8 -> 226 x 32
        ((128, 32), 32, (64, 32)),  # 64 x 32 exactly; 16 px rounds (half to even) to 0, then at least 32
    ],
)
def test_reference_sizes_follow_comfyuis_node(size, resolution, expected):
    from nodes.library.qwen import reference_size

    assert reference_size(*size, resolution) == expected


@pytest.fixture(scope="module")
def vae(qwen3vl_workspace):
    from nodes.loaders import VAELoader
    from nodes.models.qwen_image21_demo import FILES, tiny_qwen_image21_state_dicts
    from nodes.workspace import activate

    activate(qwen3vl_workspace)
    folder = Path(qwen3vl_workspace.folder_paths("vae")[0])
    save_file(tiny_qwen_image21_state_dicts()["vae"], str(folder / Path(FILES["vae"]).name))
    return VAELoader().load_vae(Path(FILES["vae"]).name)[0]


def _references():
    torch.manual_seed(11)
    return {"images.image_1": torch.rand(1, 70, 50, 4), "images.image_3": torch.rand(2, 96, 96, 3)}


def test_reference_images_given_a_vae_become_latents_at_their_slots(clip, vae):
    from nodes.models.loader import load_text_encoder, load_vae
    from nodes.upscale import common_upscale

    pos, neg, latent = asyncio.run(TextEncodeQwenImage21().execute(clip, "make it red", "", 96, vae, **_references()))
    refs = _references()
    first = common_upscale(refs["images.image_1"].movedim(-1, 1), 96, 128, "lanczos", "disabled").movedim(1, -1)
    second = refs["images.image_3"][:1]  # already 96x96: used as it is, its first picture only
    seen = [first[..., :3] * first[..., 3:] + (1 - first[..., 3:]), second]
    te, decoder = load_text_encoder(clip), load_vae(vae)
    latents = [decoder.encode(first), decoder.encode(second)]
    for conditioning, text in ((pos, "make it red"), (neg, "")):
        cond, opts = conditioning[0]
        expected, slots = te.encode_with_slots(te.tokenize(text, images=2), seen, keep_vision=False)
        torch.testing.assert_close(cond, expected, rtol=0, atol=0)
        assert opts["image_slots"] == slots and len(slots) == 2
        assert all(torch.equal(a, b) for a, b in zip(opts["reference_latents"], latents, strict=True))
    assert latents[0].shape == (1, 64, 8, 6)  # the RGBA reference keeps its alpha for the 2.1 VAE
    assert torch.equal(latent["samples"], torch.zeros(1, 64, 8, 6))  # the first reference's size


def test_reference_images_without_a_vae_stay_in_the_prompt(clip):
    from nodes.models.loader import load_text_encoder

    image = _references()["images.image_3"]
    pos, _, latent = asyncio.run(TextEncodeQwenImage21().execute(clip, "x", "y", 0, **{"images.image_2": image}))
    te = load_text_encoder(clip)
    cond, opts = pos[0]
    expected = te.encode(te.tokenize("x", images=1), [image[:1]])[0]
    torch.testing.assert_close(cond, expected, rtol=0, atol=0)
    assert "image_slots" not in opts and "reference_latents" not in opts
    assert torch.equal(latent["samples"], torch.zeros(1, 64, 6, 6))


def test_other_encoders_and_bad_images_are_refused_by_name(clip):
    other = clip.__class__(**{**clip.__dict__, "arch": "qwen_image"})
    with pytest.raises(ValueError, match="clip: TextEncodeQwenImage21 needs Qwen-Image 2.1's"):
        asyncio.run(TextEncodeQwenImage21().execute(other, "x", "", 1024))
    with pytest.raises(ValueError, match=r"Qwen-Image 2\.1's with (CLIPLoader )?type qwen_image.*not lumina2"):
        CLIPLoader().load_clip("qwen3vl_8b_tiny.safetensors", "lumina2")
    with pytest.raises(ValueError, match="prompt: expected a STRING, got NoneType"):
        asyncio.run(TextEncodeQwenImage21().execute(clip, None, "", 1024))  # an unlinked switch branch
    with pytest.raises(ValueError, match="image_2: expected an IMAGE"):
        asyncio.run(TextEncodeQwenImage21().execute(clip, "x", "", 1024, **{"images.image_2": torch.zeros(64, 64)}))


# ---- through KSampler ---------------------------------------------------------------------------------------------


def test_ksampler_on_text_encode_outputs_is_eulers_flow_loop_on_diffusers_model(qwen3vl_workspace, tmp_path):
    """UNETLoader -> QwenImage21Cache -> KSampler (euler/simple, cfg 1) on TextEncodeQwenImage21's conditioning and
    latent equals a hand-written Euler loop on diffusers' QwenImage21Transformer2DModel: ComfyUI's flow noising
    of the standardised empty latent, velocity steps on the scheduler's sigmas, the latent de-standardised."""
    from diffusers import QwenImage21Transformer2DModel

    from nodes.arch import latent_format
    from nodes.library.custom_sampler import BasicScheduler
    from nodes.loaders import UNETLoader
    from nodes.model_nodes import KSampler
    from nodes.models.loader import load_text_encoder
    from nodes.workspace import activate
    from tests.models.test_qwen_image21 import CONFIG, comfy_layout

    torch.set_num_threads(1)
    ws = activate(qwen3vl_workspace)
    torch.manual_seed(0)
    reference = QwenImage21Transformer2DModel(**{**CONFIG, "context_in_dim": 32}).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.1)
    save_file(
        comfy_layout(reference.state_dict()),
        str(Path(ws.folder_paths("diffusion_models")[0]) / "qwen_image_2.1_tiny.safetensors"),
    )
    clip = CLIPLoader().load_clip("qwen3vl_8b_tiny.safetensors", "qwen_image")[0]

    async def run():
        (unet,) = UNETLoader().load_unet("qwen_image_2.1_tiny.safetensors", "default")
        (model,) = QwenImage21Cache().execute(unet, "auto", "default")
        pos, neg, latent = await TextEncodeQwenImage21().execute(clip, "a red fox", "", 64)
        (out,) = await KSampler().sample(model, 42, 3, 1.0, "euler", "simple", pos, neg, latent)
        (sigmas,) = BasicScheduler().get_sigmas(model, "simple", 3, 1.0)
        return unet, out["samples"], sigmas, latent["samples"]

    unet, ours, sigmas, empty = asyncio.run(run())
    assert unet.arch == "qwen_image21" and ours.shape == (1, 64, 4, 4)
    te = load_text_encoder(clip)
    context = te.encode(te.tokenize("a red fox"))[0]
    fmt = latent_format("qwen_image21")
    generator = torch.Generator().manual_seed(42)
    noise = torch.randn(empty.shape, generator=generator)
    x = sigmas[0] * noise + (1 - sigmas[0]) * fmt.process_in(empty)
    b, c, h, w = x.shape
    img_mask = torch.tensor([[False] * context.shape[1] + [True] * (h * w // 4)])
    with torch.no_grad():
        for s, s_next in pairwise(sigmas):
            v = reference(
                hidden_states=x.flatten(2).mT,
                encoder_hidden_states=context,
                timestep=s.reshape(1),
                img_shapes=[[(1, h, w)]],
                img_mask=img_mask,
                return_dict=False,
            )[0]
            x = x + (s_next - s) * v[:, -h * w :].mT.reshape(b, c, h, w)
    expected = fmt.process_out(x)
    assert (ours - expected).abs().max() <= 1e-4 * expected.abs().max()
    assert sigmas[0] == 1.0 and len(sigmas) == 4


def test_an_empty_latent_for_8x_is_resized_for_the_16x_model_as_todays_comfyui() -> None:
    """comfy.sample.fix_empty_latent_channels: EmptyLatentImage's 4-channel zeros at 1/8 (downscale_ratio_spacial
    8) become the model's 64 channels at 1/16, sides rounded; a latent with content or without the ratio stays."""
    from nodes.ksampler import fix_empty_latent_channels

    ref = ModelRef(component="diffusion_model", arch="qwen_image21", sources=(), digests=())
    assert fix_empty_latent_channels(ref, torch.zeros(1, 4, 40, 42), 8).shape == (1, 64, 20, 21)
    assert fix_empty_latent_channels(ref, torch.zeros(1, 4, 41, 40), 8).shape == (1, 64, 20, 20)  # round(20.5)
    assert fix_empty_latent_channels(ref, torch.zeros(1, 64, 40, 40), None).shape == (1, 64, 40, 40)
    assert fix_empty_latent_channels(ref, torch.ones(1, 64, 40, 40), 8).shape == (1, 64, 40, 40)


def test_simple_schedule_is_comfyuis_model_sampling_flux_at_shift_0_69() -> None:
    """The newest ComfyUI's supported_models.QwenImage21 (shift 0.69, multiplier 1) on model_base.QwenImage21's FLUX
    model type: ModelSamplingFlux's 10000 sigmas exp(mu) / (exp(mu) + 1/t - 1), the simple scheduler's picks."""
    import math

    from nodes.library.custom_sampler import BasicScheduler

    ref = ModelRef(component="diffusion_model", arch="qwen_image21", sources=(), digests=())
    (ours,) = BasicScheduler().get_sigmas(ref, "simple", 25, 1.0)
    t = torch.arange(1, 10001, dtype=torch.float32) / 10000
    table = math.exp(0.69) / (math.exp(0.69) + (1 / t - 1))
    expected = [float(table[-(1 + int(i * len(table) / 25))]) for i in range(25)] + [0.0]
    torch.testing.assert_close(ours.double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6, rtol=0)


def test_ksampler_splices_the_references_at_their_slots(qwen3vl_workspace, clip, vae):
    """KSampler on TextEncodeQwenImage21's edit conditioning (cfg 1, euler) equals an Euler loop on the loaded
    model's own step given the context, the reference latents in model space and their image_slots (the step
    itself is checked against diffusers in tests/models/test_qwen_image21.py)."""
    from nodes.arch import latent_format
    from nodes.library.custom_sampler import BasicScheduler
    from nodes.loaders import UNETLoader
    from nodes.model_nodes import KSampler
    from nodes.models.loader import load_diffusion_model
    from nodes.models.qwen_image21_demo import tiny_qwen_image21_state_dicts
    from nodes.workspace import activate

    torch.set_num_threads(1)
    ws = activate(qwen3vl_workspace)
    transformer = {k: v.float() for k, v in tiny_qwen_image21_state_dicts()["transformer"].items()}
    save_file(transformer, str(Path(ws.folder_paths("diffusion_models")[0]) / "qwen_image_2.1_edit_tiny.safetensors"))
    refs = {"images.image_1": _references()["images.image_3"][:1, :64, :32]}

    async def run():
        (unet,) = UNETLoader().load_unet("qwen_image_2.1_edit_tiny.safetensors", "default")
        pos, neg, latent = await TextEncodeQwenImage21().execute(clip, "make it red", "", 64, vae, **refs)
        (out,) = await KSampler().sample(unet, 7, 2, 1.0, "euler", "simple", pos, neg, latent)
        (sigmas,) = BasicScheduler().get_sigmas(unet, "simple", 2, 1.0)
        return unet, pos, latent["samples"], out["samples"], sigmas

    unet, pos, empty, ours, sigmas = asyncio.run(run())
    cond, opts = pos[0]
    model, fmt = load_diffusion_model(unet), latent_format("qwen_image21")
    step = {"context": cond, "ref_latents": [fmt.process_in(opts["reference_latents"][0])]}
    step["image_slots"] = opts["image_slots"]
    noise = torch.randn(empty.shape, generator=torch.Generator().manual_seed(7))
    x = sigmas[0] * noise + (1 - sigmas[0]) * fmt.process_in(empty)
    with torch.no_grad():
        for s, s_next in pairwise(sigmas):
            x = x + (s_next - s) * model.apply(x, s.reshape(1), step)
        without_slots = model.apply(x, sigmas[-2].reshape(1), {**step, "image_slots": []})
    expected = fmt.process_out(x)
    assert ours.shape == (1, 64, 6, 2) and opts["image_slots"] == [
        8
    ]  # <|im_start|> user \n < image 1 > <|vision_start|>
    assert (ours - expected).abs().max() <= 1e-5 * expected.abs().max()
    assert (without_slots - model.apply(x, sigmas[-2].reshape(1), step)).abs().max() > 1e-4  # the slot matters
