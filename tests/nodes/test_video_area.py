"""Areas on video latents against upstream ComfyUI 0.10.0 (tests/nodes/fixtures/comfyui_video_area.json,
scripts/record_comfyui_video_area.py): ConditioningSetAreaPercentageVideo's option, the area it resolves to on a
latent [B,C,T,H,W], the crop and weight a step gives its prediction, the opposite-area entry, and a 2-D area on a
video latent (its frames whole)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nodes.conditioning_areas import area_and_mult, crop, resolve
from nodes.library.video_cfg import ConditioningSetAreaPercentageVideo
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_video_area.json").read_text())


@pytest.mark.parametrize("index", range(len(FIXTURE["cases"])))
def test_video_area_equals_comfyui_0_10(index):
    case = FIXTURE["cases"][index]
    (out,) = ConditioningSetAreaPercentageVideo().append([[torch.zeros(1, 2, 3), {}]], *case["inputs"])
    opts = out[0][1]
    assert list(opts["area"]) == case["option"] and opts["strength"] == case["strength"]
    whole = [torch.ones(1, 2, 3), {"area": tuple(case["shape"][2:]) + (0, 0, 0)}]
    positive, negative = resolve([out, [[torch.zeros(1, 2, 3), {}], whole]], case["shape"])
    assert list(positive[0][1]["area"]) == case["resolved"]
    # the opposite entry: the area, with the embedding of the smallest entry containing it (the whole-latent one)
    assert [list(e[1]["area"]) for e in negative[2:]] == case["opposite_area"]
    assert all(e[0] is whole[0] for e in negative[2:]) and case["opposite_from"] == ["whole"] * len(negative[2:])
    x = torch.zeros(case["shape"])
    area, mult = area_and_mult(positive[0][1], None, x)
    assert list(area) == case["area"]
    assert torch.equal(mult, tensor(case["mult"]))
    assert crop(x, area).shape == mult.shape


@pytest.mark.parametrize("index", range(len(FIXTURE["plain"])))
def test_an_image_area_on_a_video_latent_covers_every_frame_as_in_comfyui_0_10(index):
    case = FIXTURE["plain"][index]
    area, mult = area_and_mult({"area": tuple(case["area_in"]), "strength": 1.0}, None, torch.zeros(case["shape"]))
    assert list(area) == case["area"]
    assert torch.equal(mult, tensor(case["mult"]))


def test_a_percentage_area_of_fewer_dimensions_than_the_latent_is_refused_by_name():
    entry = [torch.zeros(1, 2, 3), {"area": ("percentage", 0.5, 0.5, 0.0, 0.0), "strength": 1.0}]
    with pytest.raises(ValueError, match="a percentage area of 2 dimensions on a latent of 3"):
        resolve([[entry]], [1, 4, 8, 16, 16])
