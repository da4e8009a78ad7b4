"""CascadeKSampler keeps the light model's image when the discriminator's confidence reaches the
threshold, re-runs on the heavy model below it, and says which model answered and with what confidence."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch

from cluster.cascade.controller import CascadeController, set_default_controller
from cluster.runtime import runtime

PROMPT = "a lighthouse on a cliff at sunset"


@pytest.fixture
def graph(demo_workspace, fixed_threads):
    from nodes.latent import EmptyLatentImage
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    set_default_controller(CascadeController(budget=4))
    light, light_clip, vae = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    heavy, heavy_clip, heavy_vae = CheckpointLoaderSimple().load_checkpoint("sdxl-tiny.safetensors")

    async def encode():
        enc = CLIPTextEncode()
        return (
            (await enc.encode(light_clip, PROMPT))[0],
            (await enc.encode(light_clip, ""))[0],
            (await enc.encode(heavy_clip, PROMPT))[0],
            (await enc.encode(heavy_clip, ""))[0],
        )

    pos, neg, hpos, hneg = asyncio.run(encode())
    latent = EmptyLatentImage().generate(64, 64, 2)[0]
    yield dict(
        model=light,
        heavy_model=heavy,
        vae=vae,
        heavy_vae=heavy_vae,
        positive=pos,
        negative=neg,
        heavy_positive=hpos,
        heavy_negative=hneg,
        latent_image=latent,
        discriminator="cascade-demo-discriminator.safetensors",
        seed=5,
        steps=2,
        cfg=1.0,
        sampler_name="euler",
        scheduler="normal",
        heavy_steps=4,
        heavy_cfg=5.0,
    )
    set_default_controller(None)


def _run(graph: dict, threshold: float, **extra) -> dict:
    from nodes.cascade_nodes import CascadeKSampler

    return asyncio.run(CascadeKSampler().sample(**graph, threshold=threshold, **extra))


def _direct(graph: dict, heavy: bool) -> torch.Tensor:
    """The image one model alone gives for the same seed and latent."""
    from nodes.ksampler import common_ksampler

    p = "heavy_" if heavy else ""

    async def go():
        (lat,) = await common_ksampler(
            graph[f"{p}model"],
            graph["seed"],
            graph[f"{p}steps"],
            graph[f"{p}cfg"],
            graph["sampler_name"],
            graph["scheduler"],
            graph[f"{p}positive"],
            graph[f"{p}negative"],
            graph["latent_image"],
        )
        return (await runtime().call("vae_decode", graph[f"{p}vae"], {"latent": lat["samples"]}, {}))["image"]

    return asyncio.run(go())


def test_confidence_at_or_above_threshold_keeps_the_light_image(graph):
    out = _run(graph, 0.0)
    image, latent, confidence, answered = out["result"]
    assert answered == "light"
    assert torch.equal(image, _direct(graph, heavy=False))
    info = out["ui"]["cascade"][0]
    assert info["answered_by"] == ["light", "light"] and len(info["confidence"]) == 2
    assert confidence == pytest.approx(sum(info["confidence"]) / 2, abs=1e-6)


def test_confidence_below_threshold_reruns_on_the_heavy_model(graph):
    out = _run(graph, 1.0)
    image, _, _, answered = out["result"]
    assert answered == "heavy"
    assert torch.equal(image, _direct(graph, heavy=True))
    assert not torch.equal(image, _direct(graph, heavy=False))


def test_threshold_between_the_two_confidences_mixes_per_image(graph):
    confidences = _run(graph, 0.0)["ui"]["cascade"][0]["confidence"]
    if confidences[0] == confidences[1]:
        pytest.skip("both images scored the same")  # cannot split them; the other tests cover both routes
    t = (confidences[0] + confidences[1]) / 2
    image, _, _, answered = _run(graph, t)["result"]
    expect = ["light" if c >= t else "heavy" for c in confidences]
    assert answered == ",".join(expect)
    light, heavy = _direct(graph, False), _direct(graph, True)
    for i, who in enumerate(expect):
        assert torch.equal(image[i], (light if who == "light" else heavy)[i])


def test_answer_goes_into_png_info_and_controller(graph):
    from nodes.cascade_nodes import CascadeKSampler

    pnginfo = {"workflow": {}}
    out = asyncio.run(CascadeKSampler().sample(**graph, threshold=1.0, extra_pnginfo=pnginfo, unique_id="8"))
    assert pnginfo["cascade"]["8"] == out["ui"]["cascade"][0]
    from cluster.cascade.controller import default_controller

    stats = default_controller().stats()["cascades"]["sd1-tiny.safetensors>sdxl-tiny.safetensors"]
    assert stats["answered"] == {"light": 0, "heavy": 2} and stats["confidences_seen"] == 2
    assert stats["stages"]["heavy"]["served"] == 2 and stats["source"] == "node"


def test_named_adaptive_cascade_uses_the_controller_threshold(graph, demo_workspace):
    from cluster.cascade.controller import default_controller

    folder = demo_workspace.root / "cascades"
    folder.mkdir(exist_ok=True)
    path = folder / "demo-adaptive.yaml"
    path.write_text(
        "light: sd1-tiny.safetensors\nheavy: sdxl-tiny.safetensors\n"
        "discriminator: cascade-demo-discriminator.safetensors\nslo_s: 600\n"
    )
    try:
        ctl = default_controller()
        assert _run(graph, 1.0, cascade="demo-adaptive")["result"][3] == "heavy"  # no decision yet: widget
        ctl.tick()  # idle cluster: the decision defers everything (t = 1)
        assert ctl.threshold("demo-adaptive") == 1.0
        state = ctl.cascades["demo-adaptive"]
        state.decision = dataclasses.replace(state.decision, threshold=0.0)
        assert _run(graph, 1.0, cascade="demo-adaptive")["result"][3] == "light"  # the decision wins
        with pytest.raises(ValueError, match="not in the workspace"):
            _run(graph, 0.5, cascade="missing")
    finally:
        path.unlink()


def test_heavy_rerun_that_would_miss_the_slo_keeps_the_light_image(graph, demo_workspace):
    from cluster.cascade.controller import default_controller

    folder = demo_workspace.root / "cascades"
    folder.mkdir(exist_ok=True)
    path = folder / "tight.yaml"
    path.write_text(
        "light: sd1-tiny.safetensors\nheavy: sdxl-tiny.safetensors\n"
        "discriminator: cascade-demo-discriminator.safetensors\nslo_s: 0.5\npolicy: {threshold: 1.0}\n"
    )
    try:
        from nodes.cascade_nodes import declared_for_active_workspace

        declared_for_active_workspace()
        default_controller().record_latency("tight", "heavy", 2, 10.0)  # the heavy stage takes 10 s
        image, _, _, answered = _run(graph, 1.0, cascade="tight")["result"]
        assert answered == "light (deadline)"
        assert torch.equal(image, _direct(graph, heavy=False))
    finally:
        path.unlink()
