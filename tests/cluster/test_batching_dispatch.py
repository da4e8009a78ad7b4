"""Batching on the real dispatch path: compatible denoise_step invocations of different requests and
tenants are served by one executor run (one BatchDispatch), give the outputs they give alone, and
each tenant is charged its share of the measured time; incompatible invocations never merge, a cap
of 1 is the unbatched behaviour, and a merged run that fails is re-run part by part."""

from __future__ import annotations

import asyncio
import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch

from cluster.cluster_runtime import ClusterRuntime
from cluster.executor.local_cluster import start_local_cluster
from cluster.local import LocalRuntime
from cluster.runtime import Runtime, use_runtime
from cluster.scheduling.batching import Call

REPO = Path(__file__).resolve().parents[2]


class Recorder(Runtime):
    """Runs every call in-process and keeps the denoise_step calls (the invocations a KSampler sends)."""

    def __init__(self, local: LocalRuntime) -> None:
        self.local, self.calls = local, []

    async def call(self, fn, model, inputs, params=None, *, spread=False):
        if fn == "denoise_step":
            self.calls.append(Call(fn, model, dict(inputs), params))
        return await self.local.call(fn, model, inputs, params)


@pytest.fixture(scope="module")
def steps(demo_workspace):
    """Real denoise_step invocations of sd1-tiny: name -> the calls of one KSampler run."""
    from nodes.ksampler import common_ksampler
    from nodes.latent import EmptyLatentImage
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    model, clip, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    local = LocalRuntime()

    async def record(text: str, seed: int, batch: int, size: int, sampler: str = "euler") -> list[Call]:
        use_runtime(local)
        pos = (await CLIPTextEncode().encode(clip, text))[0]
        neg = (await CLIPTextEncode().encode(clip, "blurry"))[0]
        rec = Recorder(local)
        use_runtime(rec)
        latent = EmptyLatentImage().generate(size, size, batch)[0]
        await common_ksampler(model, seed, 2, 5.0, sampler, "normal", pos, neg, latent)
        return rec.calls

    return {
        "red": asyncio.run(record("a red barn", 11, 1, 64)),
        "blue": asyncio.run(record("a blue boat on a lake", 29, 2, 64)),
        "small": asyncio.run(record("a red barn", 11, 1, 32)),
        "noisy": asyncio.run(record("a red barn", 11, 1, 64, "euler_ancestral")),
    }


class Observed(ClusterRuntime):
    """A ClusterRuntime that keeps the head's Result of each call (executor, batch, charged share)."""

    def __init__(self, head, tenant: str, results: list) -> None:
        super().__init__(head, tenant, uuid.uuid4().hex)
        self.results = results

    def _read(self, store, result):
        self.results.append(result)
        return super()._read(store, result)


class SameTag(Observed):
    """Tags every denoise_step as batchable with every other: the head merges what the executor cannot."""

    def _batch_tag(self, fn, model, inputs, params):
        return ("forced", int(inputs["x"].shape[0]))


@pytest.fixture(scope="module")
def cluster(demo_workspace):
    # lift=False: a tenant starts at vTime 0, so its vTime is exactly what it was charged
    head, _ = start_local_cluster(1, threads_per_executor=1, lift=False, batch_window_s=5.0)
    try:
        yield head
    finally:
        head.stop()


def _model_key(calls: list[Call]) -> str:
    return calls[0].ref.key


def _run(head, calls: list[tuple[str, Call]], runtime=Observed) -> tuple[list[dict], list]:
    """Send the calls at once, each from its own tenant and request; their outputs and the Results."""
    results: list = []

    async def go():
        return await asyncio.gather(
            *(runtime(head, tenant, results).call(c.fn, c.ref, c.inputs, c.params) for tenant, c in calls)
        )

    return asyncio.run(go()), results


def _counters(head) -> tuple[int, int, int]:
    s = head.stats()
    return s["batches_dispatched"], s["parts_batched"], s["batch_fallbacks"]


def _alone(head, steps_: list[Call]) -> list[dict]:
    """Each call on its own (batch size 1): the reference."""
    key = _model_key(steps_)
    head.set_batch_size(key, 1)
    return [_run(head, [("ref", c)])[0][0] for c in steps_]


def _assert_same(alone: dict, batched: dict) -> None:
    """Bit for bit: the merge is exact and the model's layers are batch-invariant."""
    assert alone.keys() == batched.keys()
    for name, a in alone.items():
        assert torch.equal(a, batched[name]), name


def test_two_tenants_steps_share_one_run_and_each_is_charged_its_share(cluster, steps):
    red, blue = steps["red"][0], steps["blue"][0]  # step 0: 1 sample and 2 samples
    alone = _alone(cluster, [red, blue])
    before = _counters(cluster)
    cluster.set_batch_size(_model_key(steps["red"]), 3)
    (out_red, out_blue), results = _run(cluster, [("alice", red), ("bob", blue)])
    batches, parts, fallbacks = (a - b for a, b in zip(_counters(cluster), before))
    assert (batches, parts, fallbacks) == (1, 2, 0)  # one executor run served both
    assert [r.batch for r in results] == [2, 2]
    _assert_same(alone[0], out_red)
    _assert_same(alone[1], out_blue)
    # (c) vTime: each tenant pays its samples' share of the one measured run, and the shares add up
    by_share = sorted(results, key=lambda r: r.measured_s)
    batch_s = by_share[0].batch_s
    assert batch_s > 0 and by_share[1].batch_s == batch_s
    assert by_share[0].measured_s == pytest.approx(batch_s / 3) and by_share[1].measured_s == pytest.approx(
        2 * batch_s / 3
    )
    tenants = cluster.stats()["tenants"]
    assert tenants["alice"]["vtime"] == pytest.approx(batch_s / 3, rel=1e-9)
    assert tenants["bob"]["vtime"] == pytest.approx(2 * batch_s / 3, rel=1e-9)
    assert tenants["alice"]["vtime"] + tenants["bob"]["vtime"] == pytest.approx(batch_s, rel=1e-9)


def test_incompatible_steps_never_merge(cluster, steps):
    cluster.set_batch_size(_model_key(steps["red"]), 8)
    cluster.batch_window_s = 0.2
    try:
        before = _counters(cluster)
        calls = [("t1", steps["red"][0]), ("t3", steps["small"][0])]  # another latent size
        outs, results = _run(cluster, calls)
    finally:
        cluster.batch_window_s = 5.0
    assert _counters(cluster) == before
    assert [r.batch for r in results] == [1, 1]
    assert [o["x"].shape[-1] for o in outs] == [8, 4]


def test_steps_of_other_samplers_and_step_indices_share_one_run(cluster, steps):
    """The model evaluation is what a batch shares: three tenants' steps at other step indices (other
    sigmas), with a sampler that draws its own noise, run as one executor run and give their own outputs."""
    calls = [("t1", steps["red"][1]), ("t2", steps["noisy"][0]), ("t3", steps["blue"][0])]
    alone = _alone(cluster, [c for _, c in calls])
    cluster.set_batch_size(_model_key(steps["red"]), 4)
    before = _counters(cluster)
    outs, results = _run(cluster, calls)
    batches, parts, fallbacks = (a - b for a, b in zip(_counters(cluster), before))
    assert (batches, parts, fallbacks) == (1, 3, 0)
    assert [r.batch for r in results] == [3, 3, 3]
    for a, b in zip(alone, outs):
        _assert_same(a, b)


def test_batch_size_one_is_the_unbatched_path(cluster, steps):
    red, blue = steps["red"][0], steps["blue"][0]
    alone = _alone(cluster, [red, blue])
    before = _counters(cluster)
    start = time.monotonic()
    (out_red, out_blue), results = _run(cluster, [("carol", red), ("dave", blue)])  # cap still 1
    assert time.monotonic() - start < 5.0  # nobody waited for the 5 s batch window
    assert _counters(cluster) == before and [r.batch for r in results] == [1, 1]
    for a, b in ((alone[0], out_red), (alone[1], out_blue)):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_merged_run_that_fails_is_rerun_part_by_part(cluster, steps):
    red, small = steps["red"][0], steps["small"][0]  # forced into one batch: they cannot merge
    alone = _alone(cluster, [red, small])
    cluster.set_batch_size(_model_key(steps["red"]), 2)
    before = _counters(cluster)
    (out_red, out_small), results = _run(cluster, [("erin", red), ("frank", small)], runtime=SameTag)
    batches, parts, fallbacks = (a - b for a, b in zip(_counters(cluster), before))
    assert (batches, parts, fallbacks) == (1, 2, 2)
    assert [r.batch for r in results] == [1, 1]
    for a, b in ((alone[0], out_red), (alone[1], out_small)):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_step_cancelled_while_its_batch_forms_is_left_out(cluster, steps):
    from cluster.control.errors import RequestCancelled

    red, blue = steps["red"][0], steps["blue"][0]
    cluster.set_batch_size(_model_key(steps["red"]), 3)
    before = _counters(cluster)
    results: list = []

    async def go():
        quitter = Observed(cluster, "grace", results)
        first = asyncio.ensure_future(quitter.call(red.fn, red.ref, red.inputs, red.params))
        while cluster.stats()["batching"]["forming"] == 0:  # red leads a batch waiting for more
            await asyncio.sleep(0.01)
        quitter.cancel("the user interrupted")
        second = await Observed(cluster, "heidi", results).call(blue.fn, blue.ref, blue.inputs, blue.params)
        with pytest.raises(RequestCancelled):
            await first
        return second

    out = asyncio.run(go())
    assert _counters(cluster) == before and [r.batch for r in results] == [1]
    assert out["x"].shape[0] == 2


def test_take_dispatches_out_of_turn_and_its_entry_is_skipped():
    from cluster.scheduling.policies import make_scheduler
    from cluster.scheduling.tenant_scheduler import Invocation

    for policy in ("vtime", "fifo"):
        s = make_scheduler(policy, lift=False)
        invs = [
            Invocation(id=i, tenant=f"t{i % 2}", request=f"r{i}", fn="f", model_key="m", estimate=1.0) for i in range(4)
        ]
        for inv in invs:
            s.push(inv)
        s.take(invs[2])
        assert len(s) == 3 and s.tenants["t0"].running == 1 and s.tenants["t0"].vtime == 1.0
        popped = [s.pop() for _ in range(3)]
        assert invs[2] not in popped and s.pop() is None
        s.requeue(invs[2])  # lost with its executor: ready again, once
        assert s.pop() is invs[2] and s.pop() is None


def test_cascade_decisions_set_the_stage_models_batch_sizes(demo_workspace):
    from cluster.cascade.controller import CascadeController
    from cluster.cascade.head_hook import _heads, batch_size_listener, follow_head
    from cluster.cascade.spec import CascadeSpec, Policy, StageSpec
    from nodes.cascade_nodes import checkpoint_model_key

    class FakeHead:
        def __init__(self):
            self.sizes = {}

        def set_batch_size(self, key, n):
            self.sizes[key] = n

    head = FakeHead()
    controller = CascadeController(budget=2)
    controller.on_decision(batch_size_listener(controller))
    controller.add(
        CascadeSpec(
            "c",
            StageSpec("sd1-tiny.safetensors", 2),
            StageSpec("sdxl-tiny.safetensors", 4),
            "d",
            slo_s=5.0,
            policy=Policy(batch_sizes=(2, 4)),
        )
    )
    follow_head(head, checkpoint_model_key)
    try:
        decision = controller.tick()["c"]
    finally:
        _heads.remove(head)
    light, heavy = checkpoint_model_key("sd1-tiny.safetensors"), checkpoint_model_key("sdxl-tiny.safetensors")
    assert light is not None and light != heavy
    assert head.sizes[light] == decision.light_batch in (2, 4)
    assert head.sizes.get(heavy) == (decision.heavy_batch or None)


# (b) end to end: the served cluster ---------------------------------------------------------------


def _prompt(seed: int) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"]["seed"] = seed
    return prompt


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _served_images(base: str, prompts: list[dict]) -> list[np.ndarray]:
    from PIL import Image

    pids = []
    for prompt in prompts:
        body = json.dumps({"prompt": prompt, "client_id": uuid.uuid4().hex}).encode()
        pids.append(
            json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
        )
    images = []
    for pid in pids:
        deadline = time.time() + 300
        while True:
            history = json.loads(_get(f"{base}/history/{pid}")).get(pid)
            if history and history["status"]["completed"]:
                break
            assert not (history and history["status"]["status_str"] == "error"), history["status"]
            assert time.time() < deadline, f"prompt {pid} did not finish"
            time.sleep(0.2)
        (out,) = [im for o in history["outputs"].values() for im in o.get("images", [])]
        images.append(np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(out))))))
    return images


def test_served_prompts_batched_give_the_unbatched_pngs(serve, demo_workspace, fixed_threads):
    from PIL import Image

    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    base = serve(
        "--executors",
        "1",
        "--executor-threads",
        "1",
        "--max-batch",
        "2",
        "--batch-window-ms",
        "500",
        "--concurrent-prompts",
        "2",
    )
    prompts = [_prompt(101), _prompt(202)]
    served = _served_images(base, prompts)
    stats = json.loads(_get(base + "/cluster/stats"))
    registry = build_registry(demo_workspace)
    for image, prompt in zip(served, prompts):
        (path,) = asyncio.run(run_prompt(prompt, None, registry, show_progress=False))  # unbatched, in-process
        alone = np.asarray(Image.open(path))
        assert image.shape == alone.shape
        diff = np.abs(image.astype(int) - alone.astype(int))
        print(
            f"seed {prompt['3']['inputs']['seed']}: {int((diff > 0).sum())} of {diff.size} uint8 values differ, "
            f"max {int(diff.max())}; {stats['batches_dispatched']} batches"
        )
        assert np.array_equal(image, alone)
    assert not np.array_equal(served[0], served[1])  # two seeds, two images
    assert stats["batching"]["max_batch"] == 2
    # 20 steps each; the two prompts' text encodes interleave differently per run, so not every step
    # pairs up, but most do
    assert stats["batches_dispatched"] >= 10 and stats["parts_batched"] == 2 * stats["batches_dispatched"]


def test_served_in_process_prompts_batched_give_the_unbatched_pngs(serve):
    """`--executors 0 --max-batch 2`: the in-process runtime batches the two prompts' steps through the
    same executor core, and the images are those of the same server without batching (same threads)."""
    prompts = [_prompt(303), _prompt(404)]
    batched_base = serve(
        "--executors", "0", "--max-batch", "2", "--batch-window-ms", "500", "--concurrent-prompts", "2"
    )
    batched = _served_images(batched_base, prompts)
    stats = json.loads(_get(batched_base + "/cluster/stats"))
    alone = _served_images(serve("--executors", "0", "--concurrent-prompts", "2"), prompts)
    for a, b in zip(batched, alone):
        diff = np.abs(a.astype(int) - b.astype(int))
        assert np.array_equal(a, b), (
            f"{int((diff > 0).sum())} of {diff.size} uint8 values differ (max {int(diff.max())}); "
            f"{stats['batches_dispatched']} merged runs, {stats['parts_batched']} steps in them"
        )
    assert not np.array_equal(batched[0], batched[1])
    assert stats["batching"]["max_batch"] == 2
    print(f"{stats['batches_dispatched']} merged runs, {stats['parts_batched']} steps in them")
    # 20 steps each; the text encodes interleave differently per run, so not every step pairs up, but most do
    assert stats["batches_dispatched"] >= 10 and stats["parts_batched"] == 2 * stats["batches_dispatched"]


def test_served_mixed_load_batches_and_gives_the_one_at_a_time_pngs(serve, demo_workspace, fixed_threads):
    """Issue 41's load in small: prompts alternating euler/normal and dpmpp_2m/karras, new seeds and CFG
    scales, sent at once to one executor. Their steps share batches (/cluster/stats) and every image equals
    the prompt's run alone."""
    from PIL import Image

    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    base = serve(
        "--executors",
        "1",
        "--executor-threads",
        "1",
        "--max-batch",
        "4",
        "--batch-window-ms",
        "300",
        "--concurrent-prompts",
        "4",
    )
    prompts = []
    for i, (sampler, scheduler, cfg) in enumerate(
        [("euler", "normal", 8.0), ("dpmpp_2m", "karras", 8.0), ("euler", "normal", 5.0), ("dpmpp_2m", "karras", 6.5)]
    ):
        prompt = _prompt(500 + i)
        prompt["3"]["inputs"].update(steps=8, sampler_name=sampler, scheduler=scheduler, cfg=cfg)
        prompts.append(prompt)
    served = _served_images(base, prompts)
    stats = json.loads(_get(base + "/cluster/stats"))
    print(f"{stats['batches_dispatched']} batches, {stats['parts_batched']} steps in them")
    assert stats["batches_dispatched"] >= 4 and stats["parts_batched"] >= 2 * stats["batches_dispatched"]
    registry = build_registry(demo_workspace)
    for image, prompt in zip(served, prompts):
        (path,) = asyncio.run(run_prompt(prompt, None, registry, show_progress=False))  # alone, in-process
        assert np.array_equal(image, np.asarray(Image.open(path))), prompt["3"]["inputs"]
    assert len({im.tobytes() for im in served}) == 4


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--concurrent-prompts", "1"], 1),  # one prompt at a time: nothing to batch, no batch window waited
        (["--concurrent-prompts", "2"], 2),  # two prompts on one executor
        (["--concurrent-prompts", "4", "--executors", "2"], 2),
        (["--concurrent-prompts", "2", "--executors", "2"], 1),  # each executor runs one prompt
        (["--concurrent-prompts", "3", "--executors", "0"], 3),  # in-process: one compute thread
        (["--concurrent-prompts", "4", "--max-batch", "1"], 1),
    ],
)
def test_max_batch_by_default_is_the_prompts_in_flight_per_executor(argv, expected):
    from comfy_bridge.cli import build_parser
    from comfy_bridge.cli.serve import head_options, max_batch

    args = build_parser().parse_args(["serve", *argv])
    assert max_batch(args) == expected == head_options(args, None)["max_batch"]
