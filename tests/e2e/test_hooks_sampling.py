"""Weight hooks applied in sampling on the demo SD1 model: a LoRA hook over all steps gives LoraLoader's very
latent; a keyframed hook gives what sampling with the LoRA up to the keyframe and without it after gives
(KSamplerAdvanced halves); SetClipHooks gives LoraLoader's CLIP (scheduled: the CLIP and model switch at the
keyframe); a default cond fills what a masked cond leaves; and the hooked prompts give the in-process images
on two executors."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch

from tests.e2e.test_samplers_on_executors import BASE_PROMPT, differing_cases, render_in_process, render_on_server
from tests.float_tolerance import ulps_of_largest

LORA = "sd1-tiny-lora.safetensors"
STEPS = 4


def keyframes_one_then_zero():
    from nodes.library import hooks as nh

    (kf,) = nh.CreateHookKeyframe().create_hook_keyframe(1.0, 0.0)
    return nh.CreateHookKeyframe().create_hook_keyframe(0.0, 0.5, kf)[0]


def steps_before_keyframe(model) -> int:
    """How many of the steps run at the first keyframe's strength: euler evaluates once at each sigma, and
    the keyframe at 50 % takes over at the first sigma at or below its start sigma."""
    from nodes.modelfns.model_options import sampling_config
    from nodes.sampling.model_sampling import model_sampling_from_config
    from nodes.sampling.schedules import ksampler_sigmas

    ms = model_sampling_from_config(sampling_config(model))
    sigmas = ksampler_sigmas(ms, "normal", STEPS, 1.0, "euler")[:-1]
    start = float(torch.tensor(float(ms.percent_to_sigma(0.5)), dtype=sigmas.dtype))
    return int((sigmas > start).sum())


@pytest.fixture(scope="module")
def latents(demo_workspace):
    from cluster.local import set_threads
    from nodes.latent import EmptyLatentImage
    from nodes.library import hooks as nh
    from nodes.loaders import CheckpointLoaderSimple, LoraLoader
    from nodes.model_nodes import CLIPTextEncode, KSampler, KSamplerAdvanced

    async def go() -> dict[str, torch.Tensor]:
        model, clip, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
        lora_model, lora_clip = LoraLoader().load_lora(model, clip, LORA, 0.8, 0.6)
        (latent,) = EmptyLatentImage().generate(64, 64, 1)
        common = dict(cfg=7.0, sampler_name="euler", scheduler="normal")

        async def encode(c):
            return (await CLIPTextEncode().encode(c, "a bottle"))[0], (await CLIPTextEncode().encode(c, "text"))[0]

        async def sample(m, conds):
            return (
                await KSampler().sample(
                    m, 11, STEPS, positive=conds[0], negative=conds[1], latent_image=latent, denoise=1.0, **common
                )
            )[0]["samples"]

        async def split(first, first_conds, rest, rest_conds, k):
            (half,) = await KSamplerAdvanced().sample(
                first,
                "enable",
                11,
                STEPS,
                positive=first_conds[0],
                negative=first_conds[1],
                latent_image=latent,
                start_at_step=0,
                end_at_step=k,
                return_with_leftover_noise="enable",
                **common,
            )
            return (
                await KSamplerAdvanced().sample(
                    rest,
                    "disable",
                    11,
                    STEPS,
                    positive=rest_conds[0],
                    negative=rest_conds[1],
                    latent_image=half,
                    start_at_step=k,
                    end_at_step=10000,
                    return_with_leftover_noise="disable",
                    **common,
                )
            )[0]["samples"]

        plain, lora = await encode(clip), await encode(lora_clip)
        (hook_m,) = nh.CreateHookLoraModelOnly().create_hook_model_only(LORA, 0.8)
        (hook_mc,) = nh.CreateHookLora().create_hook(LORA, 0.8, 0.6)
        (scheduled,) = nh.SetHookKeyframes().set_hook_keyframes(hook_m, keyframes_one_then_zero())
        (scheduled_mc,) = nh.SetHookKeyframes().set_hook_keyframes(hook_mc, keyframes_one_then_zero())
        k = steps_before_keyframe(model)
        mask = torch.zeros(1, 64, 64)
        mask[:, :, :32] = 1.0
        masked = nh.ConditioningSetProperties().set_properties(plain[0], 1.0, "default", mask)[0]
        other = (await CLIPTextEncode().encode(clip, "a red house"))[0]
        out = {
            "base": await sample(model, plain),
            "lora_model": await sample(LoraLoader().load_lora(model, clip, LORA, 0.8, 0.0)[0], plain),
            "hook_model": await sample(
                model,
                nh.PairConditioningSetProperties().set_properties(plain[0], plain[1], 1.0, "default", hooks=hook_m),
            ),
            "scheduled": await sample(
                model,
                nh.PairConditioningSetProperties().set_properties(plain[0], plain[1], 1.0, "default", hooks=scheduled),
            ),
            "scheduled_expected": await split(
                LoraLoader().load_lora(model, clip, LORA, 0.8, 0.0)[0], plain, model, plain, k
            ),
            "lora_both": await sample(lora_model, lora),
            "clip_hooks": await sample(
                model, await encode(nh.SetClipHooks().apply_hooks(clip, True, False, hook_mc)[0])
            ),
            "clip_scheduled": await sample(
                model, await encode(nh.SetClipHooks().apply_hooks(clip, True, True, scheduled_mc)[0])
            ),
            "clip_scheduled_expected": await split(lora_model, lora, model, plain, k),
            "default_covered": await sample(
                model, (nh.ConditioningSetDefaultCombine().set_default_and_combine(plain[0], other)[0], plain[1])
            ),
            "default_fills": await sample(
                model, (nh.ConditioningSetDefaultCombine().set_default_and_combine(masked, other)[0], plain[1])
            ),
            "default_fills_expected": await sample(
                model,
                (
                    masked + nh.ConditioningSetProperties().set_properties(other, 1.0, "default", 1.0 - mask)[0],
                    plain[1],
                ),
            ),
            # the checkpoint as a LoRA on a MODEL made from it: strength * (its weights - the base's own) is 0
            "model_as_lora_same": await sample(
                LoraLoader().load_lora(model, clip, LORA, 0.8, 0.0)[0],
                nh.PairConditioningSetProperties().set_properties(
                    plain[0],
                    plain[1],
                    1.0,
                    "default",
                    hooks=nh.CreateHookModelAsLoraModelOnly().create_hook_model_only("sd1-tiny.safetensors", 0.7)[0],
                ),
            ),
        }
        return out

    before = torch.get_num_threads()
    set_threads(1)
    try:
        return asyncio.run(go())
    finally:
        set_threads(before)


def test_hook_over_all_steps_is_loraloader(latents):
    assert not torch.equal(latents["lora_model"], latents["base"])
    assert torch.equal(latents["hook_model"], latents["lora_model"])


def test_keyframed_hook_switches_the_lora_off_at_its_keyframe(latents):
    # As sampling the first steps with LoraLoader's model and the rest with the plain one; KSamplerAdvanced's
    # halves round the latent through its scaling once, hence a bound of a few ulps (see
    # test_ksampler_advanced_split: one ulp there moves the end by up to 3.5 ulps of its largest value).
    diff = (latents["scheduled"] - latents["scheduled_expected"]).abs().max().item()
    assert diff <= ulps_of_largest(latents["scheduled_expected"], 8), diff
    for other in ("base", "lora_model"):
        assert (latents["scheduled"] - latents[other]).abs().max().item() > 1e-2


def test_model_as_lora_of_the_base_checkpoint_leaves_the_weights(latents):
    assert torch.equal(latents["model_as_lora_same"], latents["lora_model"])


def test_clip_hooks_are_loraloaders_clip_and_model(latents):
    assert torch.equal(latents["clip_hooks"], latents["lora_both"])
    diff = (latents["clip_scheduled"] - latents["clip_scheduled_expected"]).abs().max().item()
    assert diff <= ulps_of_largest(latents["clip_scheduled_expected"], 8), diff
    assert (latents["clip_scheduled"] - latents["lora_both"]).abs().max().item() > 1e-2


def test_default_cond_weighs_what_the_others_leave(latents):
    assert torch.equal(latents["default_covered"], latents["base"])  # nothing left: the default is unused
    assert torch.equal(latents["default_fills"], latents["default_fills_expected"])
    assert (latents["default_fills"] - latents["base"]).abs().max().item() > 1e-2


def hook_prompt(case: str) -> dict:
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["3"]["inputs"].update(steps=STEPS, sampler_name="euler", scheduler="normal")
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"hooks_{case}"
    prompt["20"] = {
        "class_type": "CreateHookLora",
        "inputs": {"lora_name": LORA, "strength_model": 0.8, "strength_clip": 0.6},
    }
    prompt["21"] = {"class_type": "CreateHookKeyframe", "inputs": {"strength_mult": 1.0, "start_percent": 0.0}}
    prompt["22"] = {
        "class_type": "CreateHookKeyframe",
        "inputs": {"strength_mult": 0.0, "start_percent": 0.5, "prev_hook_kf": ["21", 0]},
    }
    prompt["23"] = {"class_type": "SetHookKeyframes", "inputs": {"hooks": ["20", 0], "hook_kf": ["22", 0]}}
    hooks = ["23", 0] if case.startswith("scheduled") else ["20", 0]
    if case.endswith("clip"):
        prompt["24"] = {
            "class_type": "SetClipHooks",
            "inputs": {
                "clip": ["4", 1],
                "apply_to_conds": True,
                "schedule_clip": case.startswith("scheduled"),
                "hooks": hooks,
            },
        }
        for node in ("6", "7"):
            prompt[node]["inputs"]["clip"] = ["24", 0]
    else:
        prompt["24"] = {
            "class_type": "PairConditioningSetProperties",
            "inputs": {
                "positive_NEW": ["6", 0],
                "negative_NEW": ["7", 0],
                "strength": 1.0,
                "set_cond_area": "default",
                "hooks": hooks,
            },
        }
        prompt["3"]["inputs"].update(positive=["24", 0], negative=["24", 1])
    return prompt


def hook_prompts() -> dict[str, dict]:
    return {case: hook_prompt(case) for case in ("model", "scheduled_model", "clip", "scheduled_clip")}


def test_hooked_prompts_on_two_executors_give_the_in_process_images(serve, demo_workspace):
    local = render_in_process(demo_workspace, hook_prompts())
    assert len({im.tobytes() for im in local.values()}) == len(local)  # every case changes the image
    base = serve("--executors", "2", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, hook_prompts()), local)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
