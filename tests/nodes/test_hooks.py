"""comfy_extras.nodes_hooks against ComfyUI 0.3.64 (tests/nodes/fixtures/comfyui_hooks.json, recorded by
scripts/record_comfyui_hooks.py from ComfyUI's own classes at a125cd84): the keyframes the keyframe nodes
make, the hook strength at every model evaluation of euler/heun/dpmpp_2m runs (our schedule state carried
from step to step as the denoise steps carry it), CLIP schedule ranges, and the conditioning the nodes
build. Also the weights a hook group gives (LoRA hooks as LoraLoader's patches, model-as-LoRA as merges)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, Patch
from nodes import arch
from nodes.library import hooks as nh
from nodes.modelfns.hooks import (
    CLIP_OPTION,
    HookGroup,
    HookKeyframes,
    HookWeights,
    WeightHook,
    clip_schedule,
    encodings,
    hooked_ref,
    schedule,
    set_clip_hooks,
)
from nodes.models.merge import merges, with_merge
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.samplers import run_step

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_hooks.json").read_text())
SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))
CLIP = ModelRef("text_encoder", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))
LORA = Patch("/m/lora.safetensors", "e" * 64, 1.0)


def build(kind: str, args: list) -> HookKeyframes:
    if kind == "chain":
        kf = None
        for strength, start in args:
            (kf,) = nh.CreateHookKeyframe().create_hook_keyframe(strength, start, kf)
        return kf
    if kind == "interp":
        return nh.CreateHookKeyframesInterpolated().create_hook_keyframes(*args)[0]
    return nh.CreateHookKeyframesFromFloats().create_hook_keyframes(*args)[0]


def lora_hook(strength_model: float = 1.0, strength_clip: float = 1.0, uid: str = "h") -> WeightHook:
    return WeightHook(uid, strength_model, strength_clip, lora=LORA)


@pytest.mark.parametrize("case", sorted(FIXTURE["keyframes"]))
def test_keyframe_nodes_make_comfyuis_keyframes(case):
    kf = build(*FIXTURE["keyframe_cases"][case])
    assert [[k.strength, k.start_percent, k.guarantee_steps] for k in kf.keyframes] == FIXTURE["keyframes"][case]


@pytest.mark.parametrize("run", FIXTURE["schedules"], ids=lambda r: f"{r['keyframes']}-{r['sampler']}")
def test_keyframe_strength_at_every_evaluation_is_comfyuis(run):
    ms = model_sampling_from_config(arch.sampling_config("sd1"))
    (hooks,) = nh.SetHookKeyframes().set_hook_keyframes(
        HookGroup((lora_hook(),)), build(*FIXTURE["keyframe_cases"][run["keyframes"]])
    )
    (scheduled,) = schedule(hooks, lambda p: float(ms.percent_to_sigma(p)))
    assert pytest.approx(list(scheduled.start_sigmas), rel=1e-6) == run["start_sigmas"]
    sigmas = torch.tensor(run["sigmas"], dtype=torch.float32)
    seen: list[list[float]] = []
    carried: dict[str, torch.Tensor] = {}
    for i in range(len(sigmas) - 1):
        state = dict(carried)  # what one denoise step receives and hands on
        weights = HookWeights(SD1, state, sigmas, lambda ref: None)

        def model(x, sigma):
            s = float(sigma.reshape(-1)[0])
            weights.prepare((scheduled,), s)
            weights.prepare((scheduled,), s)  # the uncond side at the same sigma counts once
            seen.append([s, weights.strength(scheduled)])
            return x * 0.5

        run_step(model, torch.ones(1, 4, 2, 2), sigmas, i, run["sampler"], 0, state)
        carried = state
    assert seen == run["evaluations"]


@pytest.mark.parametrize("case", FIXTURE["clip_schedules"], ids=str)
def test_clip_schedule_ranges_are_comfyuis(case):
    hooks = []
    for k, kfs in enumerate(case["hooks"]):
        hook = lora_hook(uid=str(k))
        hooks.append(hook if kfs is None else HookGroup((hook,)).with_keyframes(build("chain", kfs)).hooks[0])
    got = [[list(r), mults] for r, mults in clip_schedule(HookGroup(tuple(hooks)))]
    assert got == case["ranges"]


def describe(cond: list) -> list:
    out = []
    for t, opts in cond:
        d = {}
        for k, v in sorted(opts.items()):
            if k == "hooks":
                d[k] = len(v.hooks)
            elif isinstance(v, torch.Tensor):
                d[k] = {"shape": list(v.shape), "sum": float(v.sum())}
            else:
                d[k] = list(v) if isinstance(v, tuple) else v
        out.append([float(t.sum()), d])
    return out


def test_conditioning_nodes_build_comfyuis_entries():
    want = FIXTURE["conds"]
    a = [[torch.full((1, 2, 3), 1.0), {"pooled_output": None}]]
    b = [[torch.full((1, 2, 3), 2.0), {"strength": 0.5}]]
    hooks, more = HookGroup((lora_hook(uid="1"),)), HookGroup((lora_hook(uid="2"),))
    mask = torch.zeros(4, 4)
    mask[1:3, 0:2] = 1.0
    hooked = nh.with_hooks(a, hooks)
    ts = nh.ConditioningTimestepsRange().create_range(0.25, 0.75)
    assert [list(r) for r in ts] == want["timesteps_range"]
    props, pair = nh.ConditioningSetProperties().set_properties, nh.PairConditioningSetProperties().set_properties
    got = {
        "set_props_all": describe(props(b, 0.3, "mask bounds", mask, hooks, ts[0])[0]),
        "set_props_default_area": describe(props(b, 0.7, "default", mask)[0]),
        "set_props_nothing": describe(props(b, 1.0, "default")[0]),
        "set_props_append_hooks": describe(props(hooked, 1.0, "default", None, more)[0]),
        "set_props_combine": describe(
            nh.ConditioningSetPropertiesAndCombine().set_properties(a, b, 0.5, "default", mask, hooks, ts[2])[0]
        ),
        "pair_set_props": [describe(c) for c in pair(a, b, 0.4, "mask bounds", mask, hooks, ts[1])],
        "pair_set_props_combine": [
            describe(c)
            for c in nh.PairConditioningSetPropertiesAndCombine().set_properties(
                a, b, b, a, 0.4, "default", None, hooks, None
            )
        ],
        "pair_combine": [describe(c) for c in nh.PairConditioningCombine().combine(a, b, b, a)],
        "set_default_combine": describe(nh.ConditioningSetDefaultCombine().set_default_and_combine(a, b, hooks)[0]),
        "set_default_combine_nohooks": describe(nh.ConditioningSetDefaultCombine().set_default_and_combine(a, b)[0]),
        "pair_set_default_combine": [
            describe(c) for c in nh.PairConditioningSetDefaultCombine().set_default_and_combine(a, b, b, a, hooks)
        ],
    }
    assert got == {k: v for k, v in want.items() if k != "timesteps_range"}
    assert a == [[a[0][0], {"pooled_output": None}]]  # inputs are left as they were


def test_combine_hooks_like_comfyui():
    groups = [HookGroup((lora_hook(uid=str(k)),)) for k in range(3)]
    assert (nh.CombineHooks2().combine_hooks()[0] is None) == FIXTURE["combine"]["none"]
    assert (nh.CombineHooks2().combine_hooks(hooks_A=groups[0])[0] is groups[0]) == FIXTURE["combine"]["one_is_same"]
    four = nh.CombineHooks4().combine_hooks(hooks_A=groups[0], hooks_B=groups[1], hooks_C=groups[0], hooks_D=groups[2])
    assert len(four[0].hooks) == FIXTURE["combine"]["count_dupes"]
    eight = nh.CombineHooks8().combine_hooks(hooks_H=groups[2], hooks_B=groups[1])[0]
    assert [h.uid for h in eight.hooks] == ["1", "2"]  # input order, not call order


def test_lora_hook_weights_are_loraloaders_patch():
    hook = lora_hook(0.8, 0.3)
    assert hooked_ref(SD1, [(hook, 1.0)], "model") == SD1.with_patch(Patch(LORA.path, LORA.digest, 0.8))
    assert hooked_ref(CLIP, [(hook, 0.5)], "clip") == CLIP.with_patch(Patch(LORA.path, LORA.digest, 0.15))
    assert hooked_ref(SD1, [(hook, 0.0)], "model") == SD1  # strength 0: the base weights themselves


def test_model_as_lora_adds_the_difference_to_the_unpatched_base():
    other = ModelRef("diffusion_model", "sd1", ("/m/other.safetensors",), ("f" * 64,))
    base = SD1.with_patch(LORA)
    ref = hooked_ref(base, [(WeightHook("m", 0.7, 0.0, model=other), 1.0)], "model")
    steps = merges(ref)
    assert [(s.other, s.rules, s.minus) for s in steps] == [(other, (("", 1.0, 0.7),), SD1)]
    assert ref.patches == base.patches


def test_set_clip_hooks_patches_the_clip_and_schedules_its_encodings():
    (kf,) = nh.CreateHookKeyframe().create_hook_keyframe(1.0, 0.0)
    (kf,) = nh.CreateHookKeyframe().create_hook_keyframe(0.25, 0.5, kf)
    hooks = HookGroup((lora_hook(0.8, 0.6),)).with_keyframes(kf)
    plain = set_clip_hooks(CLIP, hooks, to_conds=True, scheduled=False)
    assert plain.patches == (Patch(LORA.path, LORA.digest, 0.6),)  # keyframes ignored unscheduled
    ((ref, extra),) = encodings(plain)
    assert ref is plain and extra == {"hooks": hooks}
    sched = encodings(set_clip_hooks(CLIP, hooks, to_conds=False, scheduled=True))
    assert [(r.patches, e) for r, e in sched] == [
        ((Patch(LORA.path, LORA.digest, 0.6),), {"clip_start_percent": 0.0, "clip_end_percent": 0.5}),
        ((Patch(LORA.path, LORA.digest, 0.15),), {"clip_start_percent": 0.5, "clip_end_percent": 1.0}),
    ]
    assert nh.SetClipHooks().apply_hooks(CLIP, True, False, None) == (CLIP,)


def test_scheduled_clip_keeps_what_was_done_to_the_clip_after_set_clip_hooks():
    from nodes.loaders import CLIPSetLastLayer

    (kf,) = nh.CreateHookKeyframe().create_hook_keyframe(0.5, 0.0)
    hooks = HookGroup((lora_hook(1.0, 1.0),)).with_keyframes(kf)
    other = ModelRef("text_encoder", "sd1", ("/m/other.safetensors",), ("f" * 64,))
    later = Patch("/m/later.safetensors", "a" * 64, 0.3)
    (clip,) = nh.SetClipHooks().apply_hooks(CLIP.with_patch(later), True, True, hooks)
    (clip,) = CLIPSetLastLayer().set_last_layer(clip, -2)
    clip = with_merge(clip.with_patch(later), other, (("", 0.5, 0.5),))
    ((ref, _),) = encodings(clip)
    assert ref.patches == (later, later, Patch(LORA.path, LORA.digest, 0.5))  # hooks after the CLIP's own
    assert ref.option("layer") == clip.option("layer") and ref.option(CLIP_OPTION) is None
    ((step_other, after),) = [(s.other, s.after_patches) for s in merges(ref)]
    assert (step_other, after) == (other, 2)
    (again,) = nh.SetClipHooks().apply_hooks(clip, False, False, HookGroup((lora_hook(0.0, 0.7, uid="x"),)))
    assert again.patches == (later, later, Patch(LORA.path, LORA.digest, 0.7))  # replaces the earlier hooks


def test_wrong_inputs_are_refused_with_the_input_name():
    with pytest.raises(ValueError, match="hooks_A"):
        nh.CombineHooks2().combine_hooks(hooks_A="x")
    with pytest.raises(ValueError, match="prev_hook_kf"):
        nh.CreateHookKeyframe().create_hook_keyframe(1.0, 0.0, prev_hook_kf=3)
    with pytest.raises(ValueError, match="floats_strength"):
        nh.CreateHookKeyframesFromFloats().create_hook_keyframes("abc", 0.0, 1.0)
    with pytest.raises(ValueError, match="clip"):
        nh.SetClipHooks().apply_hooks(SD1, True, False, HookGroup())
