"""Conditioning nodes: combine, concat, average, zero out, timestep range, Flux guidance - without mutating inputs."""

from __future__ import annotations

import torch

from nodes.conditioning_ops import (
    ConditioningAverage,
    ConditioningCombine,
    ConditioningConcat,
    ConditioningSetTimestepRange,
    ConditioningZeroOut,
    FluxGuidance,
)


def cond(tokens=3, dim=4, pooled=True, **opts):
    options = {"pooled_output": torch.randn(1, dim)} if pooled else {}
    return [[torch.randn(1, tokens, dim), {**options, **opts}]]


def test_combine_joins_lists():
    a, b = cond(), cond()
    (out,) = ConditioningCombine().combine(a, b)
    assert out == a + b


def test_concat_appends_first_from_entry_to_every_to_entry():
    to = cond(tokens=2) + cond(tokens=5)
    frm = cond(tokens=3) + cond(tokens=7)
    (out,) = ConditioningConcat().concat(to, frm)
    assert len(out) == 2
    for (c_out, o_out), (c_to, o_to) in zip(out, to):
        assert torch.equal(c_out, torch.cat([c_to, frm[0][0]], dim=1))
        assert o_out == o_to and o_out is not o_to


def test_zero_out_zeroes_tensor_and_pooled():
    src = cond(start_percent=0.2)
    (out,) = ConditioningZeroOut().zero_out(src)
    c, opts = out[0]
    assert c.shape == src[0][0].shape and not c.any()
    assert opts["pooled_output"].shape == (1, 4) and not opts["pooled_output"].any()
    assert opts["start_percent"] == 0.2
    assert src[0][1]["pooled_output"].any()  # the input is untouched


def test_zero_out_without_pooled():
    (out,) = ConditioningZeroOut().zero_out(cond(pooled=False))
    assert "pooled_output" not in out[0][1]


def test_timestep_range_sets_percent_keys():
    src = cond()
    (out,) = ConditioningSetTimestepRange().set_range(src, 0.25, 0.75)
    assert out[0][1]["start_percent"] == 0.25 and out[0][1]["end_percent"] == 0.75
    assert out[0][0] is src[0][0]
    assert "start_percent" not in src[0][1]


def test_average_weights_tokens_and_pooled():
    to, frm = cond(tokens=3), cond(tokens=3)
    (out,) = ConditioningAverage().addWeighted(to, frm, 0.75)
    c, opts = out[0]
    torch.testing.assert_close(c, to[0][0] * 0.75 + frm[0][0] * 0.25)
    torch.testing.assert_close(
        opts["pooled_output"], to[0][1]["pooled_output"] * 0.75 + frm[0][1]["pooled_output"] * 0.25
    )


def test_average_truncates_or_zero_pads_from_tokens():
    to = cond(tokens=4)
    long_from, short_from = cond(tokens=6), cond(tokens=2)
    (out,) = ConditioningAverage().addWeighted(to, long_from, 0.5)
    torch.testing.assert_close(out[0][0], (to[0][0] + long_from[0][0][:, :4]) * 0.5)
    (out,) = ConditioningAverage().addWeighted(to, short_from, 0.5)
    padded = torch.cat([short_from[0][0], torch.zeros(1, 2, 4)], dim=1)
    torch.testing.assert_close(out[0][0], (to[0][0] + padded) * 0.5)


def test_average_takes_pooled_from_when_to_has_none():
    to, frm = cond(pooled=False), cond()
    (out,) = ConditioningAverage().addWeighted(to, frm, 0.3)
    # Missing pooled on the "to" side defaults to the "from" one, so the blend is the "from" pooled.
    torch.testing.assert_close(out[0][1]["pooled_output"], frm[0][1]["pooled_output"])


def test_flux_guidance_sets_guidance_on_every_entry_without_mutating():
    conditioning = cond() + cond()
    (out,) = FluxGuidance().append(conditioning, 2.5)
    assert [opts["guidance"] for _, opts in out] == [2.5, 2.5]
    assert all("guidance" not in opts for _, opts in conditioning)


def test_every_entry_of_an_anima_conditioning_keeps_its_own_key():
    """flatten names each entry `{side}.{j}`; Anima's T5 ids beside an entry must not change the next one's name
    (a loop variable once shadowed the side's name: a scheduled hooked CLIP's second entry lost its tensors)."""
    from nodes.conditioning import flatten

    ids = {"t5xxl_ids": torch.tensor([1, 2]), "t5xxl_weights": torch.tensor([1.0, 1.0])}
    conditioning = [[torch.zeros(1, 3, 4), dict(ids)], [torch.ones(1, 3, 4), dict(ids)]]
    tensors, entries = flatten("positive", conditioning, lambda p: 1.0 - p)
    assert [e["key"] for e in entries] == ["positive.0", "positive.1"]
    assert {"positive.1.context", "positive.1.t5xxl_ids", "positive.1.t5xxl_weights"} <= set(tensors)
