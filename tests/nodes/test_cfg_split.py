"""CFG split (nodes.modelfns.cfg_split): a step sent as its two guidance sides apart, then combined, gives the
unsplit step's image bit for bit, for single- and multi-evaluation samplers. In-process here (the runtime made to
report two idle executors); tests/e2e/test_cfg_split_on_executors.py runs the halves on two executor processes."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from PIL import Image

from cluster.local import LocalRuntime, set_threads
from comfy_bridge.cli.run import run_prompt
from comfy_bridge.registry import build_registry
from nodes.modelfns import cfg_split
from nodes.modelfns.denoise import DenoiseParams
from nodes.sampling.samplers import SAMPLER_NAMES, get_sampler
from tests.conftest import REPO

BASE = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())


def prompt(sampler: str, scheduler: str = "karras", cfg: float = 7.5) -> dict:
    p = json.loads(json.dumps(BASE))
    p["3"]["inputs"].update(sampler_name=sampler, scheduler=scheduler, steps=3, cfg=cfg, seed=5)
    p["5"]["inputs"].update(width=64, height=64)
    p["9"]["inputs"]["filename_prefix"] = f"split_{sampler}"
    return p


@pytest.fixture
def render(demo_workspace, monkeypatch):
    """render(prompt, split) -> (image, the cfg_side of every denoise_step call)."""
    before = __import__("torch").get_num_threads()
    set_threads(1)
    registry = build_registry(demo_workspace)
    sides: list[str | None] = []
    plain_call = LocalRuntime.call

    async def call(self, fn, model, inputs, params=None, **kw):
        if fn == "denoise_step":
            sides.append(params.cfg_side if isinstance(params, DenoiseParams) else None)
        return await plain_call(self, fn, model, inputs, params, **kw)

    monkeypatch.setattr(LocalRuntime, "call", call)

    def go(p: dict, split: bool) -> tuple[np.ndarray, list[str | None]]:
        monkeypatch.setattr(LocalRuntime, "idle_executors", lambda self: 2 if split else 0)
        sides.clear()
        (path,) = asyncio.run(run_prompt(p, None, registry, show_progress=False))
        return np.asarray(Image.open(path)), list(sides)

    yield go
    set_threads(before)


@pytest.mark.parametrize("sampler", ["euler", "euler_ancestral", "dpmpp_2m", "heun", "dpmpp_sde", "lcm"])
def test_a_split_step_gives_the_unsplit_image(render, sampler):
    plain, plain_sides = render(prompt(sampler), split=False)
    split, split_sides = render(prompt(sampler), split=True)
    assert plain_sides == [None] * 3
    assert split_sides == ["positive", "negative", None] * 3  # both sides apart, then the combining step
    assert np.array_equal(split, plain), f"{int((split != plain).sum())} values differ"


SPLIT_SAMPLERS = [s for s in SAMPLER_NAMES if s not in cfg_split.UNSPLIT_SAMPLERS and not get_sampler(s).cfg_pp]


@pytest.mark.parametrize("sampler", SPLIT_SAMPLERS)
def test_every_split_step_takes_its_given_predictions(render, monkeypatch, sampler):
    """A split is worth making only when the step's first evaluation is the one the sides were made for."""
    taken: list[bool] = []
    take = cfg_split.GivenPredictions.take

    def counted(self, x, sigma):
        out = take(self, x, sigma)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(cfg_split.GivenPredictions, "take", counted)
    _, sides = render(prompt(sampler), split=True)
    assert sides == ["positive", "negative", None] * 3 and taken[:1] == [True] and taken.count(True) == 3


def test_samplers_that_do_not_step_from_the_schedule_are_not_split(render):
    _, sides = render(prompt("uni_pc"), split=True)
    assert sides == [None] * 3


def test_cfg_1_is_not_split(render):
    """At CFG 1 ComfyUI skips the negative side: there is nothing to split."""
    _, sides = render(prompt("euler", cfg=1.0), split=True)
    assert sides == [None] * 3


def test_only_plain_guidance_is_splittable():
    entry = {"key": "positive.0", "controls": []}
    params = DenoiseParams(
        sampler="euler",
        seed=0,
        cfg=7.0,
        model_sampling={"kind": "discrete"},
        positive=[entry],
        negative=[{**entry, "key": "negative.0"}],
    )
    assert cfg_split.splittable(params, {})
    assert not cfg_split.splittable(params.replace(sampler="euler_cfg_pp"), {})  # steps along the negative side
    assert not cfg_split.splittable(params, {"denoise_mask": object()})
    two = params.replace(positive=[entry, {**entry, "key": "positive.1"}])  # ConditioningCombine
    assert not cfg_split.splittable(two, {})
    with_control = params.replace(negative=[{**entry, "controls": [{"strength": 1.0}]}])
    assert not cfg_split.splittable(with_control, {})
    assert not cfg_split.splittable(params.replace(perp_neg={"neg_scale": 1.0}), {})
