"""comfy.conds: the cond wrappers packs build (CONDRegular, CONDNoiseShape, CONDCrossAttn, CONDConstant,
CONDList) batch, crop, check and join conds as ComfyUI's do (fixture recorded on ComfyUI 0.3.64 by
scripts/record_comfyui_model_surface.py)."""

from __future__ import annotations

import torch

from comfy_bridge.compat.comfy import conds as c

from .recorded import load, ramp, tensor

FIXTURE = load("comfyui_model_surface.json")["conds"]


def same(ours: torch.Tensor, entry: dict) -> None:
    torch.testing.assert_close(ours, tensor(entry), rtol=0, atol=0)


def test_regular_repeats_to_the_batch_and_joins_equal_shapes():
    a, b = ramp(1, 4, 6, 5), ramp(1, 4, 6, 5, shift=1.0)
    processed = c.CONDRegular(a).process_cond(3)
    assert type(processed) is c.CONDRegular
    same(processed.cond, FIXTURE["regular_process"])
    same(c.CONDRegular(ramp(4, 2)).process_cond(3).cond, FIXTURE["regular_process_narrow"])
    same(c.CONDRegular(a).concat([c.CONDRegular(b), c.CONDRegular(a)]), FIXTURE["regular_concat"])
    assert [
        c.CONDRegular(a).can_concat(c.CONDRegular(b)),
        c.CONDRegular(a).can_concat(c.CONDRegular(ramp(1, 4, 6, 6))),
    ] == FIXTURE["regular_can_concat"]
    assert c.CONDRegular(a).size() == FIXTURE["regular_size"]


def test_noise_shape_crops_to_the_area():
    noise = c.CONDNoiseShape(ramp(1, 4, 8, 8))
    cropped = noise.process_cond(2, area=(4, 3, 2, 1))
    assert type(cropped) is c.CONDNoiseShape
    same(cropped.cond, FIXTURE["noise_area"])
    same(noise.process_cond(2, area=None).cond, FIXTURE["noise_no_area"])


def test_crossattn_pads_token_counts_to_their_lcm_up_to_four_times():
    x77, x154, x385 = ramp(1, 77, 8), ramp(1, 154, 8, shift=0.5), ramp(1, 385, 8)
    assert [
        c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(x154)),
        c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(x385)),
        c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(ramp(1, 77, 9))),
        c.CONDCrossAttn(x77).can_concat(c.CONDCrossAttn(ramp(2, 154, 8))),
    ] == FIXTURE["crossattn_can_concat"]
    same(c.CONDCrossAttn(x77).concat([c.CONDCrossAttn(x154)]), FIXTURE["crossattn_concat"])


def test_constant_is_never_batched_and_joins_only_equal_values():
    assert [
        c.CONDConstant(3).process_cond(5).cond,
        c.CONDConstant(3).can_concat(c.CONDConstant(3)),
        c.CONDConstant(3).can_concat(c.CONDConstant(4)),
        c.CONDConstant("x").concat([]),
        c.CONDConstant(3).size(),
    ] == FIXTURE["constant"]


def test_list_batches_and_joins_element_by_element():
    lst = c.CONDList([ramp(1, 3, 2), ramp(2, 5)])
    for ours, want in zip(lst.process_cond(3).cond, FIXTURE["list_process"], strict=True):
        same(ours, want)
    joined = lst.concat([c.CONDList([ramp(1, 3, 2, shift=2.0), ramp(2, 5, shift=2.0)])])
    for ours, want in zip(joined, FIXTURE["list_concat"], strict=True):
        same(ours, want)
    assert [
        lst.can_concat(c.CONDList([ramp(1, 3, 2), ramp(2, 5)])),
        lst.can_concat(c.CONDList([ramp(1, 3, 2)])),
        lst.can_concat(c.CONDList([ramp(1, 3, 2), ramp(2, 6)])),
    ] == FIXTURE["list_can_concat"]
    assert c.CONDList([ramp(1, 3, 2), ramp(2, 5), ramp(1, 4, 7)]).size() == FIXTURE["list_size"]


def test_pack_subclass_copies_keep_their_class():
    class Tagged(c.CONDRegular):  # packs subclass conds; process_cond must hand back their class
        pass

    assert type(Tagged(ramp(1, 2)).process_cond(2)) is Tagged
