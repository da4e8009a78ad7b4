"""Pack nodes run in-process (no cluster) as in ComfyUI: V1 and V3 nodes give their results, a node
that raises fails its prompt with its message, progress and custom websocket events reach the client,
the compat surface answers, the CLIP/VAE proxies compute what the core nodes compute, a MODEL patch the
cluster honours changes KSampler exactly as ComfyUI's formula says, and one it cannot honour fails with
an error naming the pack, the node and the feature."""

from __future__ import annotations

import os

import torch

from nodes import arch, progress
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.schedules import ksampler_sigmas

from .conftest import error_of, image, output, run_prompt

CKPT = "sd1-tiny.safetensors"


async def test_v1_and_v3_nodes_compute_their_results(packs_registry):
    prompt = {
        **image(color=0),
        "inv": {"class_type": "V1Invert", "inputs": {"image": ["img", 0]}},
        "scale": {"class_type": "V3Scale", "inputs": {"image": ["inv", 0], "factor": 0.25}},
        "extra": {"class_type": "ExtraDouble", "inputs": {"image": ["scale", 0]}},
        "save": {"class_type": "PreviewImage", "inputs": {"images": ["extra", 0]}},
    }
    executor, sink = await run_prompt(packs_registry, prompt)
    assert executor.success, executor.status_messages
    assert torch.allclose(output(executor, "inv"), torch.ones(1, 8, 8, 3))
    assert torch.allclose(output(executor, "extra"), torch.full((1, 8, 8, 3), 0.5))


async def test_a_node_that_raises_fails_the_prompt_with_its_message(packs_registry):
    prompt = {
        **image(),
        "bad": {"class_type": "RaisingNode", "inputs": {"image": ["img", 0]}},
        "save": {"class_type": "PreviewImage", "inputs": {"images": ["bad", 0]}},
    }
    executor, sink = await run_prompt(packs_registry, prompt)
    assert not executor.success
    err = error_of(executor)
    assert err["node_type"] == "RaisingNode" and err["exception_message"].strip() == "raising_pack refuses this image"


async def test_progress_and_custom_events_reach_the_client(packs_registry):
    from comfy_bridge.compat.server import PromptServer

    prompt = {
        **image(),
        "prog": {"class_type": "V1Progress", "inputs": {"image": ["img", 0], "steps": 3}},
        "show": {"class_type": "V1ShowText", "inputs": {"text": ["prog", 1]}},
    }
    sent = []
    before = PromptServer.instance
    PromptServer.instance = type(
        "S", (), {"send_sync": lambda self, e, d, sid=None: sent.append((e, d)), "client_id": None}
    )()
    try:
        executor, sink = await run_prompt(packs_registry, prompt)
    finally:
        PromptServer.instance = before
    assert executor.success, executor.status_messages
    values = [(d["value"], d["max"]) for d in sink.events("progress") if d["node"] == "prog"]
    assert values == [(1, 3), (2, 3), (3, 3)]
    assert sent == [("v1_pack.done", {"node": "prog", "steps": 3, "sum": 0.0})]
    assert output(executor, "prog", 1) == str(os.getpid())  # in-process without a cluster
    assert executor.history_result["outputs"]["show"]["text"] == [str(os.getpid())]


async def test_compat_surface_answers_as_packs_expect(packs_registry, packs_ws):
    prompt = {
        **image(),
        "facts": {"class_type": "SurfaceFacts", "inputs": {"image": ["img", 0]}},
        "show": {"class_type": "V1ShowText", "inputs": {"text": ["facts", 0]}},
    }
    executor, sink = await run_prompt(packs_registry, prompt)
    assert executor.success, executor.status_messages
    facts = eval(output(executor, "facts"))  # the pack's repr of plain values
    assert CKPT in facts["checkpoints"]  # found through extra_model_paths.yaml
    assert facts["output"] == str(packs_ws.output_dir)
    assert facts["upscaled"] == [1, 16, 16, 3]
    assert facts["cond"] == {"strength": 2} and facts["callback"] and facts["schedulers"]
    assert facts["max_resolution"] == 16384


async def test_clip_and_vae_proxies_match_the_core_nodes(packs_registry, fixed_threads):
    prompt = {
        "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CKPT}},
        **image(size=64, color=0x336699),
        "pack": {
            "class_type": "EncodeAndDecode",
            "inputs": {"clip": ["ckpt", 1], "vae": ["ckpt", 2], "text": "a cat", "image": ["img", 0]},
        },
        "core_enc": {"class_type": "VAEEncode", "inputs": {"pixels": ["img", 0], "vae": ["ckpt", 2]}},
        "core_dec": {"class_type": "VAEDecode", "inputs": {"samples": ["core_enc", 0], "vae": ["ckpt", 2]}},
        "out": {"class_type": "PreviewImage", "inputs": {"images": ["pack", 1]}},
        "out2": {"class_type": "PreviewImage", "inputs": {"images": ["core_dec", 0]}},
    }
    executor, sink = await run_prompt(packs_registry, prompt)
    assert executor.success, executor.status_messages
    from nodes.model_nodes import CLIPTextEncode

    pack_cond = output(executor, "pack", 0)
    (core_cond,) = await CLIPTextEncode().encode(output(executor, "ckpt", 1), "a cat")
    assert torch.equal(pack_cond[0][0], core_cond[0][0])
    assert torch.equal(output(executor, "pack", 2)["samples"], output(executor, "core_enc", 0)["samples"])
    assert torch.equal(output(executor, "pack", 1), output(executor, "core_dec", 0))


def _sampling_prompt(model_link: list, cfg: float, scheduler: str = "normal") -> dict:
    return {
        "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CKPT}},
        "pos": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "a red bottle"}},
        "neg": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "blurry"}},
        "lat": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "ks": {
            "class_type": "KSampler",
            "inputs": {
                "model": model_link,
                "seed": 7,
                "steps": 4,
                "cfg": cfg,
                "sampler_name": "euler",
                "scheduler": scheduler,
                "positive": ["pos", 0],
                "negative": ["neg", 0],
                "latent_image": ["lat", 0],
                "denoise": 1.0,
            },
        },
        "dec": {"class_type": "VAEDecode", "inputs": {"samples": ["ks", 0], "vae": ["ckpt", 2]}},
        "out": {"class_type": "PreviewImage", "inputs": {"images": ["dec", 0]}},
    }


async def test_a_pack_cfg_patch_is_honoured_by_ksampler(packs_registry, fixed_threads):
    patched = {
        **_sampling_prompt(["patch", 0], cfg=8.0),
        "patch": {"class_type": "PatchCFG", "inputs": {"model": ["ckpt", 0]}},
    }
    executor, sink = await run_prompt(packs_registry, patched)
    assert executor.success, executor.status_messages
    half, _ = await run_prompt(packs_registry, _sampling_prompt(["ckpt", 0], cfg=4.0))
    full, _ = await run_prompt(packs_registry, _sampling_prompt(["ckpt", 0], cfg=8.0))
    # half_cfg guides at cond_scale / 2: the patched cfg-8 run is the plain cfg-4 run (up to the rounding
    # of ComfyUI's x - f(x - denoised) form), and far from the plain cfg-8 run.
    patched_out, half_out = output(executor, "ks")["samples"], output(half, "ks")["samples"]
    full_out = output(full, "ks")["samples"]
    assert torch.allclose(patched_out, half_out, rtol=1e-4, atol=1e-3)
    assert (patched_out - full_out).abs().max() > 100 * (patched_out - half_out).abs().max()


async def test_an_unhonoured_model_patch_names_pack_node_and_feature(packs_registry):
    prompt = {
        **_sampling_prompt(["bad", 0], cfg=8.0),
        "bad": {"class_type": "UnsupportedPatch", "inputs": {"model": ["ckpt", 0]}},
    }
    executor, sink = await run_prompt(packs_registry, prompt)
    assert not executor.success
    message = error_of(executor)["exception_message"]
    assert "'surface_pack'" in message and "'UnsupportedPatch'" in message
    assert "set_model_attn1_patch" in message


def test_a_pack_scheduler_is_offered_and_used_by_ksampler(packs_registry):
    from nodes.model_nodes import KSampler

    assert "surface_linear" in KSampler.INPUT_TYPES()["required"]["scheduler"][0]
    ms = model_sampling_from_config(arch.sampling_config("sd1"))
    sigmas = ksampler_sigmas(ms, "surface_linear", 4)
    expected = torch.cat([torch.linspace(float(ms.sigma_max), float(ms.sigma_min), 4), torch.zeros(1)])
    assert torch.equal(sigmas, expected)


async def test_ksampler_runs_with_the_pack_scheduler(packs_registry, fixed_threads):
    a, sink = await run_prompt(packs_registry, _sampling_prompt(["ckpt", 0], cfg=4.0, scheduler="surface_linear"))
    assert a.success, a.status_messages
    b, _ = await run_prompt(packs_registry, _sampling_prompt(["ckpt", 0], cfg=4.0, scheduler="normal"))
    assert not torch.equal(output(a, "ks")["samples"], output(b, "ks")["samples"])


def test_interrupt_flag_is_shared_with_comfy_model_management():
    import comfy.model_management as mm

    mm.interrupt_current_processing(True)
    assert progress.interrupt_requested()
    mm.interrupt_current_processing(False)
    assert not mm.processing_interrupted()
