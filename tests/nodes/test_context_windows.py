"""Context windows (ContextWindowsManual, WanContextWindowsManual) against upstream ComfyUI 0.10.0's handler
(tests/nodes/fixtures/comfyui_context_windows.json, scripts/record_comfyui_context_windows.py): the windows of each
schedule at each step, the blended predictions of a stand-in model evaluation, FreeNoise's shuffle; and sampling the
demo SD1 model with windows over the batch."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from nodes.sampling import context_windows as cwm
from tests.node_calls import call_node
from tests.recorded_tensors import tensor

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_context_windows.json").read_text())


def _recorder():
    spec = importlib.util.spec_from_file_location("record_cw", REPO / "scripts" / "record_comfyui_context_windows.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings(case: dict) -> cwm.ContextWindows:
    return cwm.ContextWindows(
        case["schedule"],
        case["fuse"],
        case["length"],
        case["overlap"],
        case["stride"],
        case["closed_loop"],
        case["dim"],
        False,
    )


CASES = range(len(FIXTURE["cases"]))


@pytest.mark.parametrize("index", CASES)
def test_windows_of_each_step_equal_comfyui_0_10(index):
    case = FIXTURE["cases"][index]
    cw, x, sigmas = settings(case), tensor(case["x"]), torch.tensor(FIXTURE["sigmas"])
    for sigma, step in zip(FIXTURE["sigmas"], case["steps"]):
        assert cw.applies(x) == step["used"]
        at = cwm.step_index(sigmas, torch.full((x.shape[0],), sigma))
        assert cwm.windows(cw, x.shape[cw.dim], at) == step["windows"], (sigma, at)


@pytest.mark.parametrize("index", CASES)
def test_blended_predictions_equal_comfyui_0_10(index, fixed_threads):
    stand_in = _recorder().stand_in
    case = FIXTURE["cases"][index]
    cw, x, sigmas = settings(case), tensor(case["x"]), torch.tensor(FIXTURE["sigmas"])
    conds = [[{}], [{}] if case["negative"] else None]
    for sigma, step in zip(FIXTURE["sigmas"], case["steps"]):
        t = torch.full((x.shape[0],), sigma)

        def evaluate(window, t=t):
            sub_t = t[window] if cw.dim == 0 else t
            return [
                None if c is None else out for c, out in zip(conds, stand_in(conds, cwm.take(x, window, cw.dim), sub_t))
            ]

        ours = cwm.blend(cw, x, cwm.step_index(sigmas, t), evaluate, len(conds))
        for k, expected in enumerate(step["out"]):
            if ours[k] is None:  # a side not evaluated: ComfyUI blends its zeros
                assert not case["negative"] and torch.count_nonzero(tensor(expected)) == 0
                continue
            torch.testing.assert_close(ours[k], tensor(expected), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("index", range(len(FIXTURE["freenoise"])))
def test_freenoise_equals_comfyui_0_10(index):
    entry = FIXTURE["freenoise"][index]
    cw = cwm.ContextWindows(
        "standard_static", "pyramid", entry["length"], entry["overlap"], 1, False, entry["dim"], True
    )
    noise = tensor(entry["noise"])
    out = cwm.freenoise(noise, cw, entry["seed"])
    assert torch.equal(out, tensor(entry["out"]))
    assert torch.equal(noise, tensor(entry["noise"]))  # a copy: the caller's noise is left as it was


def test_a_sigma_between_the_schedules_is_refused_by_name():
    with pytest.raises(ValueError, match="midpoint sampler"):
        cwm.step_index(torch.tensor([14.6, 7.1, 0.0]), torch.tensor([9.0]))


def _windowed(
    model,
    schedule="standard_static",
    fuse="pyramid",
    length=2,
    overlap=1,
    dim=0,
    freenoise=False,
    stride=1,
    closed_loop=False,
):
    return asyncio.run(
        call_node(
            "ContextWindowsManual",
            model=model,
            context_length=length,
            context_overlap=overlap,
            context_schedule=schedule,
            context_stride=stride,
            closed_loop=closed_loop,
            fuse_method=fuse,
            dim=dim,
            freenoise=freenoise,
        )
    )[0]


def test_bad_settings_are_refused_by_name():
    from cluster.refs import ModelRef

    model = ModelRef("diffusion_model", "sd1", ("/m/a.safetensors",), ("a" * 64,))
    with pytest.raises(ValueError, match="context_overlap \\(2\\) must be less than context_length \\(2\\)"):
        _windowed(model, length=2, overlap=2)
    with pytest.raises(ValueError, match="fuse_method: unknown"):
        _windowed(model, fuse="median")
    assert _windowed(model, schedule="batched", length=2, overlap=3).option(cwm.OPTION).length == 2


def test_wan_lengths_are_counted_in_video_frames():
    from cluster.refs import ModelRef

    model = ModelRef("diffusion_model", "wan21", ("/m/w.safetensors",), ("b" * 64,))
    (out,) = asyncio.run(
        call_node(
            "WanContextWindowsManual",
            model=model,
            context_length=81,
            context_overlap=30,
            context_schedule="standard_uniform",
            context_stride=1,
            closed_loop=False,
            fuse_method="pyramid",
            freenoise=True,
        )
    )
    cw = out.option(cwm.OPTION)
    assert (cw.length, cw.overlap, cw.dim, cw.freenoise) == (21, 8, 2, True)


@pytest.fixture(scope="module")
def sd1(demo_workspace):
    async def build():
        model, clip, _ = await call_node("CheckpointLoaderSimple", ckpt_name="sd1-tiny.safetensors")
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text="a glass bottle")
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text="text, watermark")
        (latent,) = await call_node("EmptyLatentImage", width=64, height=64, batch_size=3)
        return {"model": model, "positive": pos, "negative": neg, "latent_image": latent}

    return asyncio.run(build())


def _sample(parts: dict, model, sampler="euler", cfg=6.0) -> torch.Tensor:
    (out,) = asyncio.run(
        call_node(
            "KSampler",
            **{**parts, "model": model},
            seed=5,
            steps=3,
            cfg=cfg,
            sampler_name=sampler,
            scheduler="normal",
            denoise=1.0,
        )
    )
    return out["samples"]


@pytest.mark.parametrize(
    "schedule,fuse,length,overlap",
    [("batched", "flat", 1, 0), ("standard_static", "pyramid", 2, 1), ("looped_uniform", "relative", 2, 1)],
)
def test_windows_over_the_batch_of_an_image_model_give_its_plain_latents(
    sd1, schedule, fuse, length, overlap, monkeypatch, fixed_threads
):
    """SD1 predicts each latent of a batch on its own, so any blend of the windows' predictions is the plain one (as in
    ComfyUI); the windows are laid at each of the 3 steps (ModelFns run in-process here, so the spy sees them)."""
    laid = []
    real = cwm.windows
    monkeypatch.setattr(cwm, "windows", lambda cw, n, step: laid.append(step) or real(cw, n, step))
    windowed = _sample(sd1, _windowed(sd1["model"], schedule=schedule, fuse=fuse, length=length, overlap=overlap))
    assert laid == [0, 1, 2]
    torch.testing.assert_close(windowed, _sample(sd1, sd1["model"]), rtol=1e-5, atol=1e-5)


def test_freenoise_over_the_batch_samples_the_shuffled_noise(sd1, fixed_threads):
    """FreeNoise gives latent 2 the noise of latent 0 or 1 (windows of 2 overlapping by 1): with cfg 1 (the negative
    side skipped) it is sampled as that latent is."""
    free = _sample(sd1, _windowed(sd1["model"], freenoise=True), sampler="dpmpp_2m", cfg=1.0)
    plain = _sample(sd1, sd1["model"], sampler="dpmpp_2m", cfg=1.0)
    torch.testing.assert_close(free[:2], plain[:2], rtol=1e-5, atol=1e-5)
    assert any(torch.allclose(free[2], plain[k], rtol=1e-5, atol=1e-5) for k in (0, 1))
    assert not torch.allclose(free[2], plain[2], atol=1e-3)


def test_a_dim_past_the_latent_is_refused_by_name(sd1):
    with pytest.raises(ValueError, match="dim 5 is past the latent's 4 dimensions"):
        _sample(sd1, _windowed(sd1["model"], dim=5))


# --- Wan over its frames: sampled latents against ComfyUI 0.10.0 (scripts/record_comfyui_context_windows_wan.py) ---

WAN = json.loads((Path(__file__).parent / "fixtures" / "comfyui_context_windows_wan.json").read_text())


@pytest.fixture(scope="module")
def wan(tmp_path_factory):
    """wan-tiny in an active workspace; its prompts encoded and the empty 33-frame latent."""
    import hashlib

    from nodes import workspace as ws_module
    from nodes.models.wan_demo import build_demo_wan

    previous = ws_module._active
    ws = ws_module.activate(ws_module.Workspace(tmp_path_factory.mktemp("cw-wan")).create())
    build_demo_wan(ws.models_dir)
    for part in WAN["files"].values():
        digest = hashlib.sha256((ws.models_dir / part["path"]).read_bytes()).hexdigest()
        assert digest == part["sha256"], f"{part['path']} changed: re-record comfyui_context_windows_wan.json"
    setup = WAN["setup"]

    async def build():
        (model,) = await call_node(
            "UNETLoader", unet_name=WAN["files"]["t2v"]["path"].split("/")[1], weight_dtype="default"
        )
        (clip,) = await call_node(
            "CLIPLoader", clip_name=WAN["files"]["text_encoder"]["path"].split("/")[1], type="wan", device="default"
        )
        (pos,) = await call_node("CLIPTextEncode", clip=clip, text=setup["positive"])
        (neg,) = await call_node("CLIPTextEncode", clip=clip, text=setup["negative"])
        (latent,) = await call_node(
            "EmptyHunyuanLatentVideo",
            width=setup["width"],
            height=setup["height"],
            length=setup["length"],
            batch_size=1,
        )
        return {"model": model, "positive": pos, "negative": neg, "latent_image": latent}

    yield asyncio.run(build())
    ws_module._active = previous


def _wan_sample(parts: dict, model, sampler: str, cfg: float) -> torch.Tensor:
    setup = WAN["setup"]
    (out,) = asyncio.run(
        call_node(
            "KSampler",
            **{**parts, "model": model},
            seed=setup["seed"],
            steps=setup["steps"],
            cfg=cfg,
            sampler_name=sampler,
            scheduler=setup["scheduler"],
            denoise=1.0,
        )
    )
    return out["samples"]


def test_wan_plain_sampling_is_comfyuis(wan, fixed_threads):
    """The baseline the windowed cases differ from: without windows, the same latent as ComfyUI."""
    torch.testing.assert_close(_wan_sample(wan, wan["model"], "euler", 5.0), tensor(WAN["plain"]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("index", range(len(WAN["cases"])))
def test_wan_context_windows_sample_as_comfyui_0_10(wan, index, fixed_threads):
    case = WAN["cases"][index]
    (windowed,) = asyncio.run(
        call_node(
            "WanContextWindowsManual",
            model=wan["model"],
            **{
                k: case[k]
                for k in (
                    "context_length",
                    "context_overlap",
                    "context_schedule",
                    "context_stride",
                    "closed_loop",
                    "fuse_method",
                    "freenoise",
                )
            },
        )
    )
    ours = _wan_sample(wan, windowed, case["sampler"], case["cfg"])
    expected = tensor(case["samples"])
    assert not torch.allclose(expected, tensor(WAN["plain"]), atol=1e-3)  # the windows change ComfyUI's result
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-4)


# --- comfy.context_windows for node packs: a handler installed as ContextWindowsManual installs it ---


def test_a_packs_handler_samples_as_the_node_does(sd1, fixed_threads):
    from comfy_bridge.compat.comfy import context_windows as compat
    from comfy_bridge.packs.proxies import ModelPatcher

    base = sd1["model"]
    model = ModelPatcher(base.component, base.arch, base.sources, base.digests, base.patches, base.options).clone()
    model.model_options["context_handler"] = compat.IndexListContextHandler(
        compat.get_matching_context_schedule("standard_static"),
        compat.get_matching_fuse_method("pyramid"),
        context_length=4,
        context_overlap=2,
        dim=3,
    )
    compat.create_prepare_sampling_wrapper(model)
    node = _windowed(base, length=4, overlap=2, dim=3)
    assert model.option(cwm.OPTION) == node.option(cwm.OPTION)
    torch.testing.assert_close(_sample(sd1, model), _sample(sd1, node), rtol=0, atol=0)
    assert compat.CONTEXT_MAPPING["batched"](5, model.model_options["context_handler"]) == [[0, 1, 2, 3], [4]]


def test_handler_features_the_step_lacks_are_refused_by_name(sd1):
    from comfy_bridge.compat.comfy import context_windows as compat
    from comfy_bridge.packs.origin import UnsupportedFeature
    from comfy_bridge.packs.proxies import ModelPatcher

    base = sd1["model"]
    model = ModelPatcher(base.component, base.arch, base.sources, base.digests, base.patches, base.options)
    model.model_options["context_handler"] = compat.IndexListContextHandler(
        compat.get_matching_context_schedule("standard_static"),
        compat.get_matching_fuse_method("pyramid"),
        context_length=4,
        context_overlap=2,
        cond_retain_index_list="0",
    )
    with pytest.raises(UnsupportedFeature, match="cond_retain_index_list"):
        compat.create_sampler_sample_wrapper(model)
