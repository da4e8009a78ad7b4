"""A ModelFn call is one typed message (cluster.call.ModelFnCall): a real denoise step of the demo SD1 model,
sent through a head, reaches the executor as a frame that msgspec decodes into `DenoiseParams` with the
values the sampler chose; a node pack's functions ride in the call's one opaque field; and no other module
on the call's path pickles anything."""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path

import msgspec
import pytest
import torch
import zmq

from cluster import messages as m
from cluster.call import ModelFnCall, ModelSpec, pack, typed, unpack
from cluster.executor.local_cluster import start_local_cluster
from cluster.refs import ModelRef, Patch
from nodes.modelfns.denoise import DenoiseParams
from nodes.modelfns.model_patches import Patches

ROOT = Path(__file__).resolve().parents[2]


def _first_dispatch(fake: zmq.Socket, model_key: str, timeout_s: float = 60.0) -> bytes:
    """The raw frame of the first Dispatch the head sends the fake executor (heartbeats keep it alive)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fake.poll(200):
            frame = fake.recv()
            if isinstance(m.executor_decoder.decode(frame), m.Dispatch):
                return frame
        else:
            fake.send(m.encode(m.Heartbeat(0, 0, [model_key])))
    raise AssertionError(f"no Dispatch reached the fake executor in {timeout_s} s")


@pytest.fixture
def sd1_step(demo_workspace):
    """A denoise step of the demo SD1 checkpoint as KSampler sends it: its tensors and its params."""
    from nodes.ksampler import GuiderChoice, SamplerChoice, step_inputs
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode
    from nodes.modelfns.model_options import weights_ref

    model, clip, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    positive = asyncio.run(CLIPTextEncode().encode(clip, "a red barn in a snowy field"))[0]
    negative = asyncio.run(CLIPTextEncode().encode(clip, "blurry"))[0]
    samples = torch.zeros(1, 4, 8, 8)
    sigmas = torch.tensor([14.6, 7.0, 3.0, 1.0, 0.0])
    guider = GuiderChoice(model, positive, negative, cfg=6.5)
    tensors, params = step_inputs(guider, SamplerChoice("dpmpp_2m"), samples, 123456789, sigmas)
    return weights_ref(model), {**tensors, "x": torch.randn(1, 4, 8, 8)}, params.replace(step=2)


async def test_a_captured_dispatch_frame_decodes_into_denoise_params(sd1_step):
    ref, inputs, params = sd1_step
    head, rt = start_local_cluster(0, wait_s=None)
    fake = zmq.Context.instance().socket(zmq.DEALER)
    fake.setsockopt(zmq.IDENTITY, b"frame-capture")
    fake.setsockopt(zmq.LINGER, 0)
    try:
        fake.connect(head.address)
        fake.send(m.encode(m.Register("frame-capture", "h", 1, "cpu", 1, 1 << 30, 0, [ref.key], "cc-capture-")))
        call = asyncio.ensure_future(rt.bind("t", "typed-call").call("denoise_step", ref, inputs, params))
        frame = await asyncio.to_thread(_first_dispatch, fake, ref.key)
        call.cancel()
    finally:
        fake.close()
        head.stop()

    dispatch = msgspec.msgpack.decode(frame, type=m.ToExecutor)
    assert isinstance(dispatch, m.Dispatch) and isinstance(dispatch.call, ModelFnCall)
    assert dispatch.call.fn == "denoise_step"
    assert dispatch.call.objects == b""  # a plain SD1 step carries nothing pickled
    spec = dispatch.call.model  # the weights, typed too
    assert isinstance(spec, ModelSpec) and (spec.component, spec.arch, spec.digests) == (
        ref.component,
        ref.arch,
        ref.digests,
    )
    # the params are the struct's own msgpack map: any msgspec decoder reads its typed fields
    plain = msgspec.msgpack.decode(dispatch.call.params)
    assert (plain["seed"], plain["cfg"], plain["sampler"], plain["step"]) == (123456789, 6.5, "dpmpp_2m", 2)
    model, decoded = unpack(dispatch.call, DenoiseParams)
    assert isinstance(decoded, DenoiseParams)
    assert (decoded.seed, decoded.cfg, decoded.sampler, decoded.step) == (123456789, 6.5, "dpmpp_2m", 2)
    assert decoded.image_size == (64, 64)
    assert decoded.model_sampling == params.model_sampling
    assert decoded.positive == params.positive and decoded.negative == params.negative
    assert model == ref and model.key == dispatch.model_key
    assert decoded == params  # nothing lost or changed on the way


def _tiny_ref() -> ModelRef:
    return ModelRef(
        "diffusion_model", "sd1", ("/m/a.safetensors",), ("d0",), (Patch("/l/x.safetensors", "d1", 0.5),)
    ).with_option("layer", -2)


def _rescale(args: dict) -> torch.Tensor:
    return args["cond"] * 0.5


def test_pack_callables_ride_in_the_one_opaque_field():
    params = DenoiseParams(
        sampler="euler",
        seed=7,
        cfg=2.0,
        model_sampling={"kind": "eps", "shape": (1, 2)},
        positive=[{"key": "positive.0", "area": (8, 8, 0, 0), "controls": [{"ref": _tiny_ref()}]}],
        model_patches=Patches({"sampler_cfg_function": _rescale}),
    )
    call = msgspec.msgpack.decode(msgspec.msgpack.encode(pack("denoise_step", _tiny_ref(), params)), type=ModelFnCall)
    assert call.objects  # the patches, and only they, are pickled
    model, decoded = unpack(call, DenoiseParams)
    assert model == _tiny_ref() and model.key == _tiny_ref().key
    assert decoded.model_patches["sampler_cfg_function"] is _rescale
    assert decoded.positive[0]["area"] == (8, 8, 0, 0)  # tuples stay tuples, refs stay refs
    assert decoded.positive[0]["controls"][0]["ref"] == _tiny_ref()
    assert decoded.model_sampling["shape"] == (1, 2)


def test_a_bad_field_is_refused_by_name():
    with pytest.raises(msgspec.ValidationError, match="seed"):
        typed(DenoiseParams, {"sampler": "euler", "seed": "7", "cfg": 1.0, "model_sampling": {}})
    with pytest.raises(msgspec.ValidationError, match="noise_seed"):
        typed(DenoiseParams, {"sampler": "euler", "seed": 7, "cfg": 1.0, "model_sampling": {}, "noise_seed": 1})


# the modules a call passes through, from the runtime to the executor's ModelFn
CALL_PATH = [
    "cluster/runtime.py",
    "cluster/cluster_runtime.py",
    "cluster/local.py",
    "cluster/messages.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "cluster/control").glob("*.py")),
    "cluster/scheduling/batching.py",
    "cluster/executor/process.py",
    "cluster/executor/core.py",
    "cluster/executor/preloader.py",
]


def _pickle_uses(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every use of the pickle module in `path`."""
    tree = ast.parse(path.read_text())
    uses = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and node.id in ("pickle", "cloudpickle"):
                    uses.append((fn.name, node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any("pickle" in n for n in names):
                uses.append(("import", node.lineno))
    return uses


def test_pickle_appears_on_the_call_path_only_for_the_opaque_field():
    for rel in CALL_PATH:
        assert _pickle_uses(ROOT / rel) == [], f"{rel} uses pickle on the call path"
    # cluster.call pickles the objects of the one opaque field: where it packs them and where it reads them
    assert {fn for fn, _ in _pickle_uses(ROOT / "cluster/call.py")} == {"import", "pack", "hook"}


def test_binding_a_prompt_is_part_of_every_runtime():
    """The engine binds each prompt through the Runtime interface: an in-process runtime keeps no accounts and
    is its own binding; a cluster runtime charges the tenant and groups the calls under the prompt."""
    from cluster.cluster_runtime import ClusterRuntime
    from cluster.local import LocalRuntime
    from cluster.runtime import Runtime

    local = LocalRuntime()
    assert local.bind("tenant-a", "prompt-1") is local
    bound = ClusterRuntime(head=None).bind("tenant-a", "prompt-1")
    assert isinstance(bound, Runtime) and (bound.tenant, bound.request_id) == ("tenant-a", "prompt-1")
