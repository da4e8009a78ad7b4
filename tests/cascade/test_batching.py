"""Batching: two requests' denoise_step calls merged into one call through the real ModelFn give the
same latents and the same decoded images as the requests run one by one; incompatible calls are not
merged, and the batch plan respects the controller's batch size."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import torch

from cluster.call import NoParams, typed
from cluster.executor.core import DirectIO, Part, Ran
from cluster.local import LocalRuntime
from cluster.modelfn import MODEL_FNS, ModelFn, register
from cluster.runtime import Runtime, use_runtime
from cluster.scheduling.batching import Call, batch_key, charge_shares, layout_key, merge, plan_batches
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

    async def call(self, fn, model, inputs, params=None, *, spread=False):
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


def _sample(sd1, sampler: str | Sequence[tuple], runtime: Runtime, which: Sequence[int]) -> list[torch.Tensor]:
    """Run the requests in `which` concurrently through `runtime`; their final latents. `sampler`: one for all
    (normal schedule, cfg 5), or each request's (sampler, scheduler, cfg)."""
    from nodes.ksampler import common_ksampler

    model, _, conds, latents = sd1
    settings = [(sampler, "normal", 5.0)] * len(REQUESTS) if isinstance(sampler, str) else sampler

    async def go():
        use_runtime(runtime)  # asyncio.run's task has its own copy of the context: nothing leaks
        outs = await asyncio.gather(
            *[
                common_ksampler(
                    model, REQUESTS[k][1], 4, settings[k][2], settings[k][0], settings[k][1], *conds[k], latents[k]
                )
                for k in which
            ]
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


@pytest.mark.parametrize(
    "settings",
    [
        (("euler", "normal", 5.0), ("dpmpp_2m", "karras", 7.5)),
        (("euler_ancestral", "normal", 4.0), ("heun", "karras", 6.0)),  # a noise stream; two evaluations a step
    ],
)
def test_steps_of_different_samplers_share_forward_passes_and_give_their_own_images(sd1, settings, monkeypatch):
    from nodes.modelfns import shared_forward

    local = LocalRuntime()
    alone = [_sample(sd1, settings, local, [k])[0] for k in range(len(REQUESTS))]
    shared: list[int] = []  # the evaluations in each forward pass of the batched runs
    evaluate = shared_forward.evaluate
    monkeypatch.setattr(shared_forward, "evaluate", lambda group: (shared.append(len(group)), evaluate(group))[1])
    batcher = LockstepBatcher(local, len(REQUESTS))
    batched = _sample(sd1, settings, batcher, range(len(REQUESTS)))
    assert [tuple(sorted(sizes)) for sizes in batcher.merged] == [(1, 2)] * 4  # every step: one run for both
    assert shared.count(2) >= 4  # each step's first evaluation of both requests in one forward pass
    for one, many in zip(alone, batched):
        assert torch.equal(one, many)


def _call(**over) -> Call:
    from cluster.refs import ModelRef

    ref = over.pop("ref", ModelRef("diffusion_model", "sd1", ("m.safetensors",), ("d1",)))
    sigmas = over.pop("sigmas", torch.tensor([14.6, 3.0, 0.0]))
    x = over.pop("x", torch.zeros(1, 4, 8, 8))
    context = over.pop("context", torch.zeros(1, 77, 768))
    state = over.pop("state", {})
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
    inputs = {"x": x, "sigmas": sigmas, "positive.0.context": context, **state}
    return Call("denoise_step", ref, inputs, typed(DenoiseParams, params))


def test_steps_share_a_key_whatever_their_sampler_schedule_seed_or_cfg():
    """What must match is the model evaluation (weights, latent and conditioning layout); the sampler's
    arithmetic runs per request inside the batch (nodes.modelfns.shared_forward)."""
    from cluster.refs import ModelRef

    base = batch_key(_call())
    assert base is not None
    for same in (
        _call(seed=99),
        _call(x=torch.ones(3, 4, 8, 8)),  # only the batch differs
        _call(step=1),
        _call(cfg=7.0),
        _call(sampler="heun"),
        _call(sampler="euler_ancestral", state={"state.noise_gen": torch.zeros(2, dtype=torch.int64)}),
        _call(sampler="dpmpp_2m", state={"state.old_denoised": torch.zeros(1, 4, 8, 8)}),
        _call(sigmas=torch.tensor([14.6, 2.9, 1.0, 0.0])),
    ):
        assert batch_key(same) == base
    for other in (
        _call(x=torch.zeros(1, 4, 16, 8)),
        _call(x=torch.zeros(1, 4, 8, 8, dtype=torch.float16)),
        _call(context=torch.zeros(1, 154, 768)),  # a longer prompt: another conditioning layout
        _call(ref=ModelRef("diffusion_model", "sd1", ("n.safetensors",), ("d2",))),
        _call(compute_dtype="bfloat16"),
    ):
        assert batch_key(other) not in (None, base)
    assert batch_key(_call(model_patches=object())) is None
    # MiniMax H3 first/last frames: their rows are noised from each request's own seed
    assert batch_key(_call(positive=[{"key": "positive.0", "keyframe_frames": [0]}])) is None
    assert batch_key(Call("vae_decode", None, {}, VAEParams())) is None


def test_plan_respects_the_batch_size_and_keeps_incompatible_calls_apart():
    calls = [
        _call(),
        _call(x=torch.zeros(2, 4, 8, 8)),
        _call(x=torch.zeros(1, 4, 16, 8)),
        _call(step=1, sampler="dpmpp_2m"),
        _call(model_patches=object()),
        _call(x=torch.zeros(2, 4, 8, 8)),
    ]
    assert plan_batches(calls, max_batch=4) == [[0, 1, 3], [2], [4], [5]]
    assert plan_batches(calls, max_batch=1) == [[0], [1], [2], [3], [4], [5]]


class _Scale(ModelFn):
    """A ModelFn batched by concatenation (`layout_key`, the default merge): x times ten."""

    name = "cc_test_scale"

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_input("context")
        self.add_output("x")

    def load_model(self, ref):
        return None

    def execute(self, model, inputs, params):
        return {"x": inputs["x"] * 10}

    @classmethod
    def batch_key(cls, call):
        return layout_key(cls, call)


if _Scale.name not in MODEL_FNS:
    register(_Scale)


def test_merge_expands_shared_conditioning_and_split_cuts_outputs_back():
    from cluster.refs import ModelRef
    from cluster.scheduling.batching import split

    ref = ModelRef("scale", "test", ("s.safetensors",), ("s1",))
    a = Call(_Scale.name, ref, {"x": torch.full((1, 4, 8, 8), 1.0), "context": torch.zeros(1, 77, 8)}, NoParams())
    b = Call(_Scale.name, ref, {"x": torch.full((2, 4, 8, 8), 2.0), "context": torch.ones(1, 77, 8)}, NoParams())
    m = merge([a, b])
    assert m.sizes == (1, 2) and m.inputs["x"].shape[0] == 3 and not m.calls
    assert m.inputs["context"][:, 0, 0].tolist() == [0.0, 1.0, 1.0]
    parts = split(m, {"x": m.inputs["x"] * 10, "hist": torch.stack([m.inputs["x"]] * 2), "none": None})
    assert parts[0]["x"].unique().tolist() == [10.0] and parts[1]["x"].shape[0] == 2
    assert parts[1]["hist"].shape == (2, 2, 4, 8, 8) and parts[0]["none"] is None
    assert charge_shares(m.sizes, 3.0) == [1.0, 2.0]


def test_denoise_steps_merge_as_their_calls():
    """A denoising step's batch keeps its calls whole (each runs as its own lane in execute_batch)."""
    a, b = _call(), _call(x=torch.ones(2, 4, 8, 8), sampler="dpmpp_2m", cfg=3.0)
    m = merge([a, b])
    assert m.sizes == (1, 2) and m.calls == (a, b) and m.inputs == {}
