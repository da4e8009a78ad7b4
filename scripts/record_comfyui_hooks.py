"""Record ComfyUI's hook keyframes, keyframe schedules and hook conditioning structures, as a test fixture.

Run inside ComfyUI's own environment (it imports ComfyUI's modules; nothing of ComfyUI is copied here):

    cd <ComfyUI source> && PYTHONPATH=<site>:. OMP_NUM_THREADS=2 <ComfyUI venv>/bin/python \
        /work/main/scripts/record_comfyui_hooks.py /work/main/tests/nodes/fixtures/comfyui_hooks.json

Records, from ComfyUI's own classes and functions:
- "keyframes": what the keyframe nodes (CreateHookKeyframe chains, CreateHookKeyframesInterpolated with each
  curve, CreateHookKeyframesFromFloats) produce: (strength, start_percent, guarantee_steps) per keyframe;
- "schedules": the hook strength at every model evaluation of a sampling run: ComfyUI's k-diffusion samplers
  (euler, heun, dpmpp_2m) run over an SD1 sigma schedule with a toy denoiser that, like calc_cond_batch,
  prepares the keyframe group at the evaluated sigma and reads the strength; the keyframes' start sigmas too;
- "clip_schedules": HookGroup.get_hooks_for_clip_schedule's ranges and per-hook strengths;
- "conds": the option keys and values the conditioning nodes write (hooks as the count of hooks).
"""

from __future__ import annotations

import json
import sys

import torch
from comfyui_recording import comfyui_on_cpu

out_path = sys.argv[1]
comfyui_on_cpu()
import comfy.hooks  # noqa: E402
import comfy.k_diffusion.sampling as kd  # noqa: E402
import comfy.model_sampling  # noqa: E402
import comfy.samplers  # noqa: E402
from comfy_extras import nodes_hooks as nh  # noqa: E402

COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"


def kf_list(group: comfy.hooks.HookKeyframeGroup) -> list:
    return [[float(k.strength), float(k.start_percent), int(k.guarantee_steps)] for k in group.keyframes]


def chain(specs: list) -> comfy.hooks.HookKeyframeGroup:
    kf = None
    for strength, start in specs:
        (kf,) = nh.CreateHookKeyframe().create_hook_keyframe(strength, start, kf)
    return kf


KEYFRAME_CASES = {
    "chain": ("chain", [[1.0, 0.0], [0.0, 0.5]]),
    "chain_unsorted": ("chain", [[0.5, 0.6], [2.0, 0.2], [1.5, 0.2], [0.25, 0.0]]),
    "chain_late_first": ("chain", [[0.0, 0.5]]),
    **{f"interp_{m}": ("interp", [0.2, 1.7, m, 0.1, 0.9, 6]) for m in comfy.hooks.InterpolationMethod._LIST},
    "interp_reversed_percents": ("interp", [1.0, 0.0, "linear", 0.8, 0.2, 4]),
    "floats": ("floats", [[0.5, 1.0, 0.25, 2.0], 0.0, 1.0]),
    "floats_single": ("floats", [0.75, 0.3, 0.6]),
}


def build_keyframes(kind: str, args: list) -> comfy.hooks.HookKeyframeGroup:
    if kind == "chain":
        return chain(args)
    if kind == "interp":
        s0, s1, method, p0, p1, n = args
        return nh.CreateHookKeyframesInterpolated().create_hook_keyframes(s0, s1, method, p0, p1, n)[0]
    floats, p0, p1 = args
    return nh.CreateHookKeyframesFromFloats().create_hook_keyframes(floats, p0, p1)[0]


class _Config:
    sampling_settings = {"beta_schedule": "linear", "linear_start": 0.00085, "linear_end": 0.012}


def schedule_run(
    kf: comfy.hooks.HookKeyframeGroup, sampler: str, scheduler: str, steps: int, denoise_from: int
) -> dict:
    ms = comfy.model_sampling.ModelSamplingDiscrete(_Config())
    sigmas = comfy.samplers.calculate_sigmas(ms, scheduler, steps)[denoise_from:]
    kf = kf.clone()
    kf.reset()
    kf.initialize_timesteps(type("M", (), {"model_sampling": ms})())
    seen = []

    def model(x, sigma, **_):
        kf.prepare_current_keyframe(sigma[0], {"sample_sigmas": sigmas})
        seen.append([float(sigma[0]), float(kf.strength)])
        return x * 0.5

    fn = {"euler": kd.sample_euler, "heun": kd.sample_heun, "dpmpp_2m": kd.sample_dpmpp_2m}[sampler]
    fn(model, torch.ones(1, 4, 2, 2), sigmas, disable=True)
    return {
        "sampler": sampler,
        "scheduler": scheduler,
        "steps": steps,
        "denoise_from": denoise_from,
        "sigmas": sigmas.tolist(),
        "start_sigmas": [float(k.start_t) for k in kf.keyframes],
        "evaluations": seen,
    }


def clip_case(kfs_per_hook: list) -> dict:
    group = comfy.hooks.HookGroup()
    hooks = []
    for kfs in kfs_per_hook:
        h = comfy.hooks.WeightHook()
        if kfs is not None:
            h.hook_keyframe = chain(kfs)
        group.add(h)
        hooks.append(h)
    ranges = []
    for (lo, hi), pairs in group.get_hooks_for_clip_schedule():
        strengths = {id(h): (1.0 if k is None else float(k.strength)) for h, k in pairs}
        ranges.append([[float(lo), float(hi)], [strengths[id(h)] for h in hooks]])
    return {"hooks": kfs_per_hook, "ranges": ranges}


def describe(cond: list) -> list:
    """Each entry's options, hooks as their count, masks as shape and sum."""
    out = []
    for t, opts in cond:
        d = {}
        for k, v in sorted(opts.items()):
            if k == "hooks":
                d[k] = len(v)
            elif isinstance(v, torch.Tensor):
                d[k] = {"shape": list(v.shape), "sum": float(v.sum())}
            else:
                d[k] = list(v) if isinstance(v, tuple) else v
        out.append([float(t.sum()), d])
    return out


def cond_cases() -> dict:
    a = [[torch.full((1, 2, 3), 1.0), {"pooled_output": None}]]
    b = [[torch.full((1, 2, 3), 2.0), {"strength": 0.5}]]
    hooks = comfy.hooks.HookGroup()
    hooks.add(comfy.hooks.WeightHook())
    more = comfy.hooks.HookGroup()
    more.add(comfy.hooks.WeightHook())
    mask = torch.zeros(4, 4)
    mask[1:3, 0:2] = 1.0
    hooked = comfy.hooks.set_hooks_for_conditioning(a, hooks)
    ts = nh.ConditioningTimestepsRange().create_range(0.25, 0.75)
    return {
        "timesteps_range": [list(r) for r in ts],
        "set_props_all": describe(
            nh.ConditioningSetProperties().set_properties(b, 0.3, "mask bounds", mask, hooks, ts[0])[0]
        ),
        "set_props_default_area": describe(nh.ConditioningSetProperties().set_properties(b, 0.7, "default", mask)[0]),
        "set_props_nothing": describe(nh.ConditioningSetProperties().set_properties(b, 1.0, "default")[0]),
        "set_props_append_hooks": describe(
            nh.ConditioningSetProperties().set_properties(hooked, 1.0, "default", None, more)[0]
        ),
        "set_props_combine": describe(
            nh.ConditioningSetPropertiesAndCombine().set_properties(a, b, 0.5, "default", mask, hooks, ts[2])[0]
        ),
        "pair_set_props": [
            describe(c)
            for c in nh.PairConditioningSetProperties().set_properties(a, b, 0.4, "mask bounds", mask, hooks, ts[1])
        ],
        "pair_set_props_combine": [
            describe(c)
            for c in nh.PairConditioningSetPropertiesAndCombine().set_properties(
                a, b, b, a, 0.4, "default", None, hooks, None
            )
        ],
        "pair_combine": [describe(c) for c in nh.PairConditioningCombine().combine(a, b, b, a)],
        "set_default_combine": describe(nh.ConditioningSetDefaultAndCombine().set_default_and_combine(a, b, hooks)[0]),
        "set_default_combine_nohooks": describe(nh.ConditioningSetDefaultAndCombine().set_default_and_combine(a, b)[0]),
        "pair_set_default_combine": [
            describe(c) for c in nh.PairConditioningSetDefaultAndCombine().set_default_and_combine(a, b, b, a, hooks)
        ],
    }


def main() -> None:
    keyframes = {name: kf_list(build_keyframes(*spec)) for name, spec in KEYFRAME_CASES.items()}
    schedules = []
    for name in ("chain", "chain_unsorted", "chain_late_first", "interp_linear", "interp_ease_in_out", "floats"):
        for sampler, scheduler, steps, start in (
            ("euler", "normal", 10, 0),
            ("heun", "karras", 6, 0),
            ("dpmpp_2m", "simple", 12, 4),
        ):
            run = schedule_run(build_keyframes(*KEYFRAME_CASES[name]), sampler, scheduler, steps, start)
            schedules.append({"keyframes": name, **run})
    clip_schedules = [
        clip_case(c)
        for c in (
            [None],
            [[[1.0, 0.0], [0.5, 0.5]]],
            [[[0.0, 0.5]]],
            [[[1.0, 0.0], [1.0, 0.3], [0.2, 0.6]], [[0.5, 0.0], [2.0, 0.4]], None],
            [[[0.3, 0.0], [0.6, 1.0]]],
        )
    ]
    combine = {}
    groups = []
    for _ in range(3):
        g = comfy.hooks.HookGroup()
        g.add(comfy.hooks.WeightHook())
        groups.append(g)
    combine["none"] = nh.CombineHooks().combine_hooks()[0] is None
    combine["one_is_same"] = nh.CombineHooks().combine_hooks(groups[0], None)[0] is groups[0]
    combine["count_dupes"] = len(nh.CombineHooksFour().combine_hooks(groups[0], groups[1], groups[0], groups[2])[0])
    json.dump(
        {
            "comfyui_commit": COMMIT,
            "how": "scripts/record_comfyui_hooks.py run in ComfyUI 0.3.64's venv on the CPU",
            "keyframe_cases": KEYFRAME_CASES,
            "keyframes": keyframes,
            "schedules": schedules,
            "clip_schedules": clip_schedules,
            "conds": cond_cases(),
            "combine": combine,
        },
        open(out_path, "w"),
        indent=1,
    )


if __name__ == "__main__":
    main()
