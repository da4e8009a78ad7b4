"""The model-side module surface packs import: server.BinaryEventTypes (and binary sends from a pack
reaching the websocket), latent_preview's previewers, comfy.latent_formats (our scaling, ComfyUI's RGB
factors), comfy.ops (no init, casting), comfy.diffusers_convert (our renames, round trips on the demo
models), comfy.lora (patches applied as our LoRA merge computes them), comfy.clip_vision (our
preprocessing), and a pack importing all of them loads and runs."""

from __future__ import annotations

import asyncio
import struct

import numpy as np
import pytest
import torch
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient, TestServer
from safetensors.torch import load_file

from comfy_bridge import compat
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes import previews
from nodes.models import clip, components, vae

from .conftest import output, run_prompt

compat.install()
import comfy.clip_vision  # noqa: E402
import comfy.diffusers_convert  # noqa: E402
import comfy.latent_formats as lf  # noqa: E402
import comfy.lora  # noqa: E402
import comfy.ops  # noqa: E402
import latent_preview  # noqa: E402
import server  # noqa: E402


@pytest.fixture
def previews_on():
    previews.set_method("latent2rgb")
    yield
    previews.set_method("none")


def test_server_re_exports_comfyuis_binary_event_types():
    from comfy_bridge.compat.protocol import BinaryEventTypes

    assert server.BinaryEventTypes is BinaryEventTypes
    assert (
        BinaryEventTypes.PREVIEW_IMAGE,
        BinaryEventTypes.UNENCODED_PREVIEW_IMAGE,
        BinaryEventTypes.TEXT,
        BinaryEventTypes.PREVIEW_IMAGE_WITH_METADATA,
    ) == (1, 2, 3, 4)


async def test_binary_events_a_pack_sends_reach_the_websocket(packs_ws, tmp_path):
    from PIL import Image

    from comfy_bridge.server import ServerConfig, create_app

    web_root = tmp_path / "web"
    web_root.mkdir()
    (web_root / "index.html").write_text("<html></html>")
    client = TestClient(TestServer(create_app(ServerConfig(workspace=packs_ws, front_end_root=web_root))))
    await client.start_server()
    try:
        ws = await client.ws_connect("/ws?clientId=pack")
        instance = server.PromptServer.instance
        instance.send_sync(
            server.BinaryEventTypes.UNENCODED_PREVIEW_IMAGE, ("PNG", Image.new("RGB", (4, 4)), None), "pack"
        )
        await instance.send_bytes(server.BinaryEventTypes.PREVIEW_IMAGE, struct.pack(">I", 1) + b"jpeg", "pack")
        frames = []
        while len(frames) < 2:
            msg = await asyncio.wait_for(ws.receive(), 10)
            if msg.type == WSMsgType.BINARY:
                frames.append(msg.data)
        # send_bytes goes out at once, send_sync through the publish loop: either may come first
        png = next(f for f in frames if f[8:12] == b"\x89PNG")
        assert png[:8] == struct.pack(">II", 1, 2)
        assert struct.pack(">II", 1, 1) + b"jpeg" in frames
        await ws.close()
    finally:
        await client.close()


def test_latent_formats_scale_as_ours_and_carry_comfyuis_factors():
    x = torch.randn(1, 16, 4, 4)
    for cls, ours in (
        (lf.SD15, components.SD1_LATENT),
        (lf.SDXL, components.SDXL_LATENT),
        (lf.SDXL_Playground_2_5, components.PLAYGROUND_2_5_LATENT),
        (lf.SD3, components.SD3_LATENT),
        (lf.Flux, components.FLUX_LATENT),
    ):
        fmt, t = cls(), x[:, : ours.channels]
        assert torch.equal(fmt.process_in(t), ours.process_in(t))
        assert torch.equal(fmt.process_out(t), ours.process_out(t))
        assert fmt.latent_channels == ours.channels and len(fmt.latent_rgb_factors) == ours.channels
    assert (lf.SD15().scale_factor, lf.SDXL().scale_factor) == (0.18215, 0.13025)
    assert (lf.Flux().scale_factor, lf.Flux().shift_factor, lf.SD3().shift_factor) == (0.3611, 0.1159, 0.0609)
    assert lf.SD15().latent_rgb_factors[0] == (0.3512, 0.2297, 0.3227)
    assert lf.SDXL().taesd_decoder_name == "taesdxl_decoder"
    assert isinstance(lf.Flux(), lf.SD3) and lf.for_format(components.SD1_LATENT).latent_rgb_factors is not None
    with pytest.raises(UnsupportedFeature, match="Wan21"):
        lf.Wan21()


def test_a_models_latent_format_is_comfyuis_class(demo_workspace):
    from comfy_bridge.packs.proxies import wrap
    from nodes.loaders import make_ref

    path = demo_workspace.models_dir / "checkpoints" / "sd1-tiny.safetensors"
    model = wrap(make_ref("diffusion_model", "sd1", [path]))
    assert isinstance(model.model.latent_format, lf.SD15)
    assert isinstance(model.get_model_object("latent_format"), lf.SD15)


def test_previewers_follow_our_preview_method(previews_on):
    x0 = torch.randn(1, 4, 8, 8)
    fmt = lf.SD15()
    previewer = latent_preview.get_previewer("cpu", fmt)
    assert isinstance(previewer, latent_preview.Latent2RGBPreviewer)
    rgb = torch.einsum("chw,cr->hwr", x0[0], torch.tensor(fmt.latent_rgb_factors))
    expected = ((rgb + 1) / 2).clamp(0, 1).mul(255).to(torch.uint8)
    kind, img, size = previewer.decode_latent_to_preview_image("JPEG", x0)
    assert (kind, size) == ("JPEG", previews.MAX_SIZE) and torch.equal(torch.from_numpy(np.array(img)), expected)
    assert type(latent_preview.get_previewer("cpu", components.SD1_LATENT)) is latent_preview.LatentPreviewer
    with pytest.raises(UnsupportedFeature, match="TAESD"):
        latent_preview.TAESD(None, "taesd_decoder.safetensors")


def test_previews_off_the_callback_only_reports_progress():
    assert latent_preview.get_previewer("cpu", lf.SD15()) is None
    seen = {}
    latent_preview.prepare_callback(None, 4, seen)(0, torch.ones(1), torch.zeros(1), 4)
    assert torch.equal(seen["x0"], torch.ones(1))


def test_ops_skip_init_and_cast_weights(monkeypatch):
    def no_init(*a, **k):
        raise AssertionError("weights were initialised")

    monkeypatch.setattr(torch.nn.init, "kaiming_uniform_", no_init)
    monkeypatch.setattr(torch.nn.init, "normal_", no_init)
    ops = comfy.ops.disable_weight_init
    layers = [
        ops.Linear(3, 2),
        ops.Conv2d(2, 2, 3),
        ops.conv_nd(1, 2, 2, 1),
        ops.Embedding(5, 2),
        ops.GroupNorm(1, 2),
        ops.LayerNorm(2),
    ]
    assert all(isinstance(m, torch.nn.Module) for m in layers) and isinstance(layers[2], torch.nn.Conv1d)
    monkeypatch.undo()
    lin = comfy.ops.manual_cast.Linear(3, 2, dtype=torch.float16)
    lin.load_state_dict({"weight": torch.randn(2, 3).half(), "bias": torch.randn(2).half()})
    x = torch.randn(4, 3)
    out = lin(x)
    assert out.dtype == torch.float32
    assert torch.equal(out, torch.nn.functional.linear(x, lin.weight.float(), lin.bias.float()))
    conv = comfy.ops.disable_weight_init.Conv2d(2, 2, 1)
    conv.load_state_dict({"weight": torch.ones(2, 2, 1, 1), "bias": torch.zeros(2)})
    conv.weight_function = [lambda w: w * 2]  # ComfyUI's on-the-fly weight patches
    assert torch.equal(conv(torch.ones(1, 2, 1, 1)), torch.full((1, 2, 1, 1), 4.0))


def test_diffusers_convert_round_trips_the_demo_models(demo_workspace):
    for name in ("sd1-tiny", "sdxl-tiny"):
        sd = load_file(demo_workspace.models_dir / "checkpoints" / f"{name}.safetensors")
        ldm_vae = {k[len("first_stage_model.") :]: v for k, v in sd.items() if k.startswith("first_stage_model.")}
        back = comfy.diffusers_convert.convert_vae_state_dict(vae.ldm_to_diffusers(ldm_vae))
        assert back.keys() == ldm_vae.keys() and all(torch.equal(back[k], ldm_vae[k]) for k in back)
    stem = "conditioner.embedders.1.model."
    open_clip = {k: v for k, v in sd.items() if k.startswith(stem)}
    hf = {stem + "transformer.text_model." + k: v for k, v in clip.open_clip_to_hf(open_clip, stem).items()}
    hf = {k.replace("text_model.text_projection", "text_projection"): v for k, v in hf.items()}
    back = comfy.diffusers_convert.convert_text_enc_state_dict_v20(hf, "conditioner.")
    wanted = {k: v for k, v in open_clip.items() if not k.endswith(clip.IGNORED)}
    assert back.keys() == wanted.keys() and all(torch.equal(back[k], wanted[k]) for k in back)
    assert comfy.diffusers_convert.convert_text_enc_state_dict(hf) is hf
    with pytest.raises(UnsupportedFeature):
        comfy.diffusers_convert.convert_unet_state_dict({})


def test_lora_patches_apply_as_our_merge(demo_workspace):
    from nodes.models.lora import lora_delta, lora_modules

    lora = load_file(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors")
    mods = lora_modules(lora, "demo")
    name = next(n for n, m in mods.items() if "up" in m and "down" in m)
    patches = comfy.lora.load_lora(lora, {name: "layer.weight"}, log_missing=False)
    up, down = mods[name]["up"], mods[name]["down"]
    weight = torch.randn(up.shape[0], *down.shape[1:])
    expected = weight * 0.5 + 0.75 * lora_delta(mods[name], weight, name, "demo")
    got = comfy.lora.calculate_weight(
        [(0.75, patches["layer.weight"], 0.5, None, None)], weight.clone(), "layer.weight"
    )
    assert torch.allclose(got, expected, atol=1e-6)
    diff = comfy.lora.calculate_weight([(2.0, (torch.ones(2),), 1.0, None, None)], torch.zeros(2), "k")
    assert torch.equal(diff, torch.full((2,), 2.0))


def test_clip_vision_preprocess_and_load(demo_workspace):
    from nodes.library.clip_vision import ClipVisionOutput
    from nodes.models.clip_vision import MEAN, STD

    img = torch.full((1, 100, 150, 3), 0.4)  # 102 of 255 levels
    out = comfy.clip_vision.clip_preprocess(img, size=32)
    expected = (torch.tensor(102 / 255.0) - torch.tensor(MEAN)) / torch.tensor(STD)
    assert out.shape == (1, 3, 32, 32) and torch.allclose(out[0, :, 5, 5], expected)
    half = comfy.clip_vision.clip_preprocess(img, size=32, mean=[0.5] * 3, std=[0.5] * 3, crop=False)
    assert torch.allclose(half, torch.full_like(half, (102 / 255.0 - 0.5) / 0.5), atol=1e-6)
    ref = comfy.clip_vision.load(str(demo_workspace.models_dir / "clip_vision" / "clip-vision-tiny.safetensors"))
    assert ref.component == "clip_vision"
    with pytest.raises(ValueError, match="not a CLIP vision model"):
        comfy.clip_vision.load(str(demo_workspace.models_dir / "vae" / "sd1-tiny-vae.safetensors"))
    assert comfy.clip_vision.Output is ClipVisionOutput


async def test_a_pack_importing_the_model_surface_loads_and_runs(packs_registry):
    assert {"SurfaceLatentRGB", "SurfaceProjectLatent"} <= set(packs_registry.classes)
    prompt = {
        "lat": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "proj": {"class_type": "SurfaceProjectLatent", "inputs": {"samples": ["lat", 0]}},
        "rgb": {"class_type": "SurfaceLatentRGB", "inputs": {"samples": ["proj", 0]}},
    }
    executor, _ = await run_prompt(packs_registry, prompt)
    rgb = output(executor, "rgb")
    assert rgb.shape == (1, 8, 8, 3)
    assert torch.allclose(rgb, torch.full_like(rgb, 0.5), atol=1 / 255)  # a zero latent is mid-grey
