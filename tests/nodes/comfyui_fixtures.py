"""Run the cases of a fixture recorded on real ComfyUI (scripts/record_comfyui_fixtures.py) on our engine,
in-process, and say how the outputs differ from ComfyUI's.

    fixture = load_fixture(path)
    install_inputs(fixture, workspace)                 # the same input files ComfyUI loaded
    observed = run_case(case, registry, workspace)     # described exactly as the recorder describes ComfyUI's
    problems = compare(case["expected"], observed)     # [] when they match

Outputs are described by the recorder's own functions (describe_image, describe_latent, ...), so both
sides are decoded and hashed the same way. A few recording nodes that a case may need to make its result
visible (MaskToImage, SaveLatent, LoadLatent) are stood in for here while our registry lacks them; the
stand-ins are used only then, and `run_case` says which it used.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import importlib.util
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tests.float_tolerance import ulps_of_largest

REPO = Path(__file__).resolve().parents[2]
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures" / "comfyui_0_3_64"

# The oracle runs with OMP_NUM_THREADS=2 (shared/reference/running-real-comfyui.md); some CPU kernels round by
# the thread count, so our side of a comparison runs with as many torch threads.
RECORDED_THREADS = 2


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_comfyui_fixtures", REPO / "scripts" / "record_comfyui_fixtures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


recorder = _recorder()


def fixture_files() -> list[Path]:
    return sorted(FIXTURES_DIR.glob("*.json"))


def load_fixture(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def install_inputs(fixture: dict, ws: Any) -> None:
    """Write the fixture's input files into the workspace's input folder, byte for byte."""
    for name, item in fixture.get("input_files", {}).items():
        data = base64.b64decode(item["base64"])
        assert hashlib.sha256(data).hexdigest() == item["sha256"], f"input file {name} is corrupt in the fixture"
        target = Path(ws.input_dir) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


# -- stand-ins for recording nodes our registry may lack --------------------------------------------


class _MaskToImage:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mask": ("MASK",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "convert"
    CATEGORY = "mask"

    def convert(self, mask: torch.Tensor):
        planes = mask.reshape(-1, mask.shape[-2], mask.shape[-1])
        return (planes.unsqueeze(-1).expand(-1, -1, -1, 3).clone(),)


class _SaveLatent:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT",), "filename_prefix": ("STRING", {"default": "latents/ComfyUI"})}}

    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = "_for_testing"

    def save(self, samples: dict, filename_prefix: str = "latents/ComfyUI"):
        from safetensors.torch import save_file

        from nodes.workspace import active

        subfolder, _, stem = filename_prefix.rpartition("/")
        folder = Path(active().output_dir) / subfolder
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{stem}_{uuid.uuid4().hex[:8]}_.latent"
        save_file(
            {"latent_tensor": samples["samples"].contiguous(), "latent_format_version_0": torch.tensor([])},
            str(folder / name),
        )
        return {"ui": {"latents": [{"filename": name, "subfolder": subfolder, "type": "output"}]}}


class _LoadLatent:
    @classmethod
    def INPUT_TYPES(cls):
        from nodes.workspace import active

        folder = Path(active().input_dir)
        return {"required": {"latent": (sorted(p.name for p in folder.glob("*.latent") if p.is_file()),)}}

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "load"
    CATEGORY = "_for_testing"

    def load(self, latent: str):
        from safetensors.torch import load_file

        from nodes.workspace import active

        tensors = load_file(str(Path(active().input_dir) / latent))
        scale = 1.0 if "latent_format_version_0" in tensors else 1.0 / 0.18215
        return ({"samples": tensors["latent_tensor"].float() * scale},)


STAND_INS = {"MaskToImage": _MaskToImage, "SaveLatent": _SaveLatent, "LoadLatent": _LoadLatent}


def with_stand_ins(registry: Any, prompt: dict) -> list[str]:
    """Add the stand-ins the prompt needs and the registry lacks; returns their names."""
    used = []
    for node in prompt.values():
        name = node.get("class_type")
        if name in STAND_INS and name not in registry.classes:
            registry.classes[name] = STAND_INS[name]
            used.append(name)
        elif name in STAND_INS and registry.classes[name] is STAND_INS[name]:
            used.append(name)
    return sorted(set(used))


# -- running a case on our engine ---------------------------------------------------------------------


class _Sink:
    """A MessageSink that keeps nothing: the executor's own status_messages say what happened."""

    def __init__(self) -> None:
        self.client_id = None
        self.last_node_id = None

    def send_sync(self, event: Any, data: Any, sid: str | None = None) -> None:
        pass


async def _execute(prompt: dict, registry: Any) -> tuple[str, Any]:
    from cluster.local import SharedCompute
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.validation import validate_prompt

    asyncio.get_running_loop().set_default_executor(SharedCompute())
    prompt_id = str(uuid.uuid4())
    valid, error, outputs, node_errors = await validate_prompt(registry, prompt_id, prompt, None)
    if not valid:
        return "validation", (error, node_errors)
    executor = PromptExecutor(registry, _Sink())  # fresh caches: every case really executes
    await executor.execute_async(prompt, prompt_id, {}, outputs)
    return "executed", (executor, node_errors)


def run_case(case: dict, registry: Any, ws: Any) -> dict:
    """Our engine's result for `case`, described like the fixture's `expected` (plus 'stand_ins')."""
    from cluster.local import run_on_compute

    prompt = json.loads(json.dumps(case["prompt"]))
    stand_ins = with_stand_ins(registry, prompt)
    kind, payload = run_on_compute(lambda: _execute(prompt, registry))
    if kind == "validation":
        result = recorder.describe_validation_failure(*payload)
    else:
        executor, node_errors = payload
        err = next((data for event, data in executor.status_messages if event == "execution_error"), None)
        if err is not None:
            result = recorder.describe_execution_error(err)
        else:
            bases = {"output": ws.output_dir, "temp": ws.temp_dir, "input": ws.input_dir}

            def fetch(item: dict) -> bytes:
                return (
                    Path(bases[item.get("type", "output")]) / item.get("subfolder", "") / item["filename"]
                ).read_bytes()

            result = {
                "status": "success",
                "outputs": recorder.describe_outputs(
                    executor.history_result.get("outputs", {}), case.get("record"), fetch
                ),
            }
            if node_errors:
                result["node_errors"] = recorder.describe_validation_failure(None, node_errors)["node_errors"]
    result["stand_ins"] = stand_ins
    return result


# -- comparing ----------------------------------------------------------------------------------------


def _first_difference(expected: np.ndarray, observed: np.ndarray, names: tuple[str, ...]) -> str:
    diff = np.abs(expected.astype(np.float64) - observed.astype(np.float64))
    where = np.argwhere(diff > 0)
    if not len(where):
        return "values equal"
    first = tuple(int(i) for i in where[0])
    at = ", ".join(f"{n}={i}" for n, i in zip(names, first))
    return (
        f"max abs diff {diff.max():g}, {len(where)} of {diff.size} values differ, first at ({at}): "
        f"ComfyUI {expected[first].item()!r} vs ours {observed[first].item()!r}"
    )


# CPU kernels of different instruction sets (AVX-512, AVX2) sum in different orders, and so do ComfyUI's on
# another machine: a recording made on one CPU is met on another within what that rounding explains. These
# nodes are short chains of float32 ops (resampling, convolutions up to 19x19, blends): a few ulps of the
# largest value for latents; for 8-bit pixels, a value whose float sits near a .5 boundary may round to the
# neighbouring level, which touches few pixels, never most of them as a real rounding difference would.
LATENT_ULPS = 16
PIXEL_FLIP_SHARE = 0.02


def _within_rounding(expected: np.ndarray, observed: np.ndarray) -> bool:
    """Pixels that differ only by float32 rounding: at most one level, on at most PIXEL_FLIP_SHARE of them."""
    if expected.shape != observed.shape:
        return False
    diff = np.abs(expected.astype(np.int64) - observed.astype(np.int64))
    return int(diff.max(initial=0)) <= 1 and np.count_nonzero(diff) <= PIXEL_FLIP_SHARE * diff.size


def _compare_image(where: str, exp: dict, obs: dict) -> list[str]:
    if exp["shape"] != obs["shape"] or exp["mode"] != obs["mode"]:
        return [f"{where}: shape/mode ComfyUI {exp['shape']} {exp['mode']} vs ours {obs['shape']} {obs['mode']}"]
    if exp["sha256"] == obs["sha256"]:
        return []
    # An output whose pixels float32 rounding moves whole (an edge map's ties broken the other way) may carry ComfyUI's
    # own output of the case recorded on another CPU too, by its hash: ours must equal one of them exactly.
    if obs["sha256"] in exp.get("sha256_on_other_cpus", []):
        return []
    if "pixels" in exp and "pixels" in obs:
        expected, observed = np.array(exp["pixels"]), np.array(obs["pixels"])
        if _within_rounding(expected, observed):
            return []
        detail = _first_difference(expected, observed, ("y", "x", "c"))
    else:
        detail = f"pixels not recorded (larger than 16x16); channel means ComfyUI {exp.get('mean')} vs ours {obs.get('mean')}"
    return [f"{where}: pixels differ: {detail}"]


def _compare_latent(where: str, exp: dict, obs: dict) -> list[str]:
    if exp["shape"] != obs["shape"]:
        return [f"{where}: latent shape ComfyUI {exp['shape']} vs ours {obs['shape']}"]
    if exp["sha256"] == obs["sha256"]:
        return []
    if "values" in exp and "values" in obs:
        expected = np.array(exp["values"], np.float32).reshape(exp["shape"])
        observed = np.array(obs["values"], np.float32).reshape(obs["shape"])
        if np.abs(expected.astype(np.float64) - observed).max(initial=0.0) <= ulps_of_largest(expected, LATENT_ULPS):
            return []
        detail = _first_difference(
            expected,
            observed,
            ("b", "c", "h", "w")[-len(exp["shape"]) :]
            if len(exp["shape"]) <= 4
            else tuple(f"d{i}" for i in range(len(exp["shape"]))),
        )
    else:
        detail = f"values not recorded; mean ComfyUI {exp.get('mean')} vs ours {obs.get('mean')}"
    return [f"{where}: latent values differ: {detail}"]


def _error_key(e: dict) -> dict:
    return {
        "type": e.get("type"),
        "message": e.get("message"),
        "details": e.get("details"),
        "input_name": (e.get("extra_info") or {}).get("input_name"),
    }


def _compare_node_errors(exp: dict, obs: dict) -> list[str]:
    problems = []
    for node_id in sorted(set(exp) | set(obs)):
        e, o = exp.get(node_id), obs.get(node_id)
        if e is None or o is None:
            problems.append(f"node_errors[{node_id}]: ComfyUI {e} vs ours {o}")
            continue
        ek, ok = [_error_key(x) for x in e["errors"]], [_error_key(x) for x in o["errors"]]
        if ek != ok:
            problems.append(f"node_errors[{node_id}].errors: ComfyUI {ek} vs ours {ok}")
        for key in ("class_type", "dependent_outputs"):
            if e.get(key) != o.get(key):
                problems.append(f"node_errors[{node_id}].{key}: ComfyUI {e.get(key)!r} vs ours {o.get(key)!r}")
    return problems


def _summary(result: dict) -> str:
    return json.dumps({k: v for k, v in result.items() if k not in ("status", "stand_ins", "outputs")})[:600]


def compare(expected: dict, observed: dict) -> list[str]:
    """Readable differences between ComfyUI's recorded result and ours; [] when they match."""
    if expected["status"] != observed["status"]:
        return [
            f"status: ComfyUI {expected['status']} {_summary(expected)} vs ours {observed['status']} "
            f"{_summary(observed)}"
        ]
    problems: list[str] = []
    if expected["status"] == "validation_error":
        e, o = _error_key(expected["error"]), _error_key(observed["error"])
        if e != o:
            problems.append(f"error: ComfyUI {e} vs ours {o}")
        problems += _compare_node_errors(expected["node_errors"], observed["node_errors"])
        return problems
    if expected["status"] == "execution_error":
        e, o = expected["execution_error"], observed["execution_error"]
        for key in ("node_id", "node_type", "exception_type", "exception_message"):
            if e.get(key) != o.get(key):
                problems.append(f"execution_error.{key}: ComfyUI {e.get(key)!r} vs ours {o.get(key)!r}")
        return problems
    problems += _compare_node_errors(expected.get("node_errors", {}), observed.get("node_errors", {}))
    for node_id, exp in expected["outputs"].items():
        obs = observed["outputs"].get(node_id)
        if exp is None or obs is None:
            if exp != obs:
                problems.append(f"node {node_id}: ComfyUI output {exp is not None} vs ours {obs is not None}")
            continue
        for kind, check in (("images", _compare_image), ("latents", _compare_latent)):
            e_items, o_items = exp.get(kind, []), obs.get(kind, [])
            if len(e_items) != len(o_items):
                problems.append(f"node {node_id}: {len(e_items)} {kind} from ComfyUI vs {len(o_items)} from ours")
            for i, (e_item, o_item) in enumerate(zip(e_items, o_items)):
                problems += check(f"node {node_id} {kind}[{i}]", e_item, o_item)
        if exp.get("ui", {}) != obs.get("ui", {}):
            problems.append(f"node {node_id} ui: ComfyUI {exp.get('ui', {})} vs ours {obs.get('ui', {})}")
    return problems
