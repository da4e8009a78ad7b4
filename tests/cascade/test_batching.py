"""Batching: two requests' denoise_step calls merged into one call through the real ModelFn give the
same latents and the same decoded images as the requests run one by one; incompatible calls are not
merged, and the batch plan respects the controller's batch size."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import torch

from cluster.call import typed
from cluster.executor.core import DirectIO, Part, Ran
from cluster.local import LocalRuntime
from cluster.runtime import Runtime, use_runtime
from cluster.scheduling.batching import Call, batch_key, charge_shares, merge, plan_batches
from nodes.modelfns.denoise import DenoiseParams
from nodes.modelfns.vae import VAEParams

REQUESTS = (("a red barn in a snowy field", 11, 1), ("a blue boat on a calm lake", 29, 2))  # prompt, seed, batch


class LockstepBatcher(Runtime):
    """Holds denoise_step calls until every request has sent its next one, then runs them merged
    (what the head does when the controller's batch size lets them share an executor)."""

    def __init__(self, local: LocalRuntime, requests: int) -> None:
        self.local, self.requests = local, requests
        self.pending: list[tuple[Call, asyncio.Future]] = []
        self.merged: list[tuple[int, ...]] = []

    async def call(self, fn, model, inputs, params=None):
        if fn != "denoise_step":
            return await self.local.call(fn, model, inputs, params)
        future = asyncio.get_running_loop().create_future()
        self.pending.append((Call(fn, model, dict(inputs), params), future))
        if len(self.pending) == self.requests:
            batch, self.pending = self.pending, []
            calls = [c for c, _ in batch]
            assert plan_batches(calls, max_batch=8) == [list(range(len(calls)))]
            # the executor core's merged run, as an executor runs a BatchDispatch
            parts = [
                Part(
                    c.ref,
                    c.params,
                    {k: v for k, v in c.inputs.items() if v is not None},
                    [k for k, v in c.inputs.items() if v is None],
                )
                for c in calls
            ]
            results = self.local.core.run(fn, parts, DirectIO(torch.device("cpu")))
            assert all(isinstance(r, Ran) and r.batch == len(calls) for r in results), results
            self.merged.append(merge(calls).sizes)
            for (_, f), result in zip(batch, results):
                f.set_result(result.outputs)
        return await future


@pytest.fixture
def sd1(demo_workspace, fixed_threads):
    from nodes.latent import EmptyLatentImage
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    model, clip, vae = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")

    async def encode(text):
        return (await CLIPTextEncode().encode(clip, text))[0]

    conds = [(asyncio.run(encode(p)), asyncio.run(encode("blurry"))) for p, _, _ in REQUESTS]
    latents = [EmptyLatentImage().generate(64, 64, n)[0] for _, _, n in REQUESTS]
    return model, vae, conds, latents


def _sample(sd1, sampler: str, runtime: Runtime, which: Sequence[int]) -> list[torch.Tensor]:
    """Run the requests in `which` concurrently through `runtime`; their final latents."""
    from nodes.ksampler import common_ksampler

    model, _, conds, latents = sd1

    async def go():
        use_runtime(runtime)  # asyncio.run's task has its own copy of the context: nothing leaks
        outs = await asyncio.gather(
            *[common_ksampler(model, REQUESTS[k][1], 4, 5.0, sampler, "normal", *conds[k], latents[k]) for k in which]
        )
        return [o[0]["samples"] for o in outs]

    return asyncio.run(go())


def _decode(local: LocalRuntime, vae, latent: torch.Tensor) -> torch.Tensor:
    return local.run("vae_decode", vae, {"latent": latent}, {})["image"]


@pytest.mark.parametrize("sampler", ["euler", "dpmpp_2m"])  # dpmpp_2m carries history in the step state
def test_batched_steps_give_the_same_images_as_unbatched(sd1, sampler):
    local = LocalRuntime()
    alone = [_sample(sd1, sampler, local, [k])[0] for k in range(len(REQUESTS))]
    batcher = LockstepBatcher(local, len(REQUESTS))
    batched = _sample(sd1, sampler, batcher, range(len(REQUESTS)))
    # every step of both requests ran as one batch of 3, whichever request sent its step first
    assert [tuple(sorted(sizes)) for sizes in batcher.merged] == [(1, 2)] * 4
    for one, many in zip(alone, batched):
        assert one.shape == many.shape
        diff = (one - many).abs().max().item()
        img_one, img_many = _decode(local, sd1[1], one), _decode(local, sd1[1], many)
        to8 = lambda im: (im * 255).clamp(0, 255).to(torch.uint8)  # noqa: E731  (SaveImage's quantisation)
        u_one, u_many = to8(img_one), to8(img_many)
        print(
            f"{sampler}: max |latent diff| = {diff:.3g} (max |latent| {one.abs().max().item():.3g}), "
            f"max |image diff| = {(img_one - img_many).abs().max().item():.3g}, "
            f"uint8 values differing: {(u_one != u_many).sum().item()} of {u_one.numel()}, "
            f"max uint8 diff {(u_one.int() - u_many.int()).abs().max().item()}"
        )
        # The merge is exact and the model's layers are batch-invariant (nodes.models.batch_invariant):
        # the batched latents are the unbatched ones, bit for bit.
        assert torch.equal(one, many)
        assert torch.equal(u_one, u_many)


def _call(**over) -> Call:
    from cluster.refs import ModelRef

    ref = over.pop("ref", ModelRef("diffusion_model", "sd1", ("m.safetensors",), ("d1",)))
    sigmas = over.pop("sigmas", torch.tensor([14.6, 3.0, 0.0]))
    x = over.pop("x", torch.zeros(1, 4, 8, 8))
    params = {
        "sampler": "euler",
        "step": 0,
        "cfg": 5.0,
        "seed": 1,
        "positive": [{"key": "positive.0"}],
        "negative": [],
        "model_sampling": {"kind": "eps"},
        "image_size": (64, 64),
        **over,
    }
    inputs = {"x": x, "sigmas": sigmas, "positive.0.context": torch.zeros(1, 77, 768)}
    return Call("denoise_step", ref, inputs, typed(DenoiseParams, params))


def test_only_compatible_calls_share_a_key():
    from cluster.refs import ModelRef

    base = batch_key(_call())
    assert base is not None
    assert batch_key(_call(seed=99)) == base  # the seed is not read by euler
    assert batch_key(_call(x=torch.ones(3, 4, 8, 8))) == base  # only the batch differs
    for other in (
        _call(step=1),
        _call(cfg=7.0),
        _call(sampler="heun"),
        _call(x=torch.zeros(1, 4, 16, 8)),
        _call(sigmas=torch.tensor([14.6, 2.9, 0.0])),
        _call(ref=ModelRef("diffusion_model", "sd1", ("n.safetensors",), ("d2",))),
    ):
        assert batch_key(other) not in (None, base)
    assert batch_key(_call(sampler="euler_ancestral")) is None  # its noise stream is per request
    assert batch_key(_call(model_patches=object())) is None
    # MiniMax H3 first/last frames: their rows are noised from each request's own seed
    assert batch_key(_call(positive=[{"key": "positive.0", "keyframe_frames": [0]}])) is None
    assert batch_key(Call("vae_decode", None, {}, VAEParams())) is None


def test_plan_respects_the_batch_size_and_keeps_incompatible_calls_apart():
    calls = [
        _call(),
        _call(x=torch.zeros(2, 4, 8, 8)),
        _call(step=1),
        _call(),
        _call(sampler="euler_ancestral"),
        _call(x=torch.zeros(2, 4, 8, 8)),
    ]
    assert plan_batches(calls, max_batch=4) == [[0, 1, 3], [2], [4], [5]]
    assert plan_batches(calls, max_batch=1) == [[0], [1], [2], [3], [4], [5]]


def test_merge_expands_shared_conditioning_and_split_cuts_outputs_back():
    a, b = _call(x=torch.full((1, 4, 8, 8), 1.0)), _call(x=torch.full((2, 4, 8, 8), 2.0))
    b.inputs["positive.0.context"] = torch.ones(1, 77, 768)
    m = merge([a, b])
    assert m.sizes == (1, 2) and m.inputs["x"].shape[0] == 3
    assert m.inputs["positive.0.context"][:, 0, 0].tolist() == [0.0, 1.0, 1.0]
    from cluster.scheduling.batching import split

    parts = split(m, {"x": m.inputs["x"] * 10, "state.hist": torch.stack([m.inputs["x"]] * 2), "none": None})
    assert parts[0]["x"].unique().tolist() == [10.0] and parts[1]["x"].shape[0] == 2
    assert parts[1]["state.hist"].shape == (2, 2, 4, 8, 8) and parts[0]["none"] is None
    assert charge_shares(m.sizes, 3.0) == [1.0, 2.0]
