#!/usr/bin/env python
"""Record what a running ComfyUI does with model-free prompts, as fixtures our engine is tested against.

    python scripts/record_comfyui_fixtures.py --url http://127.0.0.1:PORT \\
        tests/nodes/fixtures/comfyui_cases/core.json [--comfyui-commit SHA] [--only NAME ...]

Run ComfyUI with OMP_NUM_THREADS=2 (--cpu): some CPU kernels round by the thread count, and the test runs
our side with as many threads (tests/nodes/comfyui_fixtures.py RECORDED_THREADS).

The cases file is JSON, either a list of cases or {"family": NAME, "input_files": {...}, "cases": [...]}.
A case is {"name": ..., "prompt": {API-format prompt}, "record": [output node ids] (optional: every output
node that reported something), "expect": "success" | "validation_error" | "execution_error" (optional, a
check on the recording), "note": ... (optional)}. `input_files` maps a file name to a generator spec
({"generator": "gradient_rgba" | "gradient_rgb" | "gradient_l" | "gradient_la" | "checker_rgb", "width": W,
"height": H}); each is made here, uploaded to ComfyUI's input folder, and stored in the fixture (base64) so
the test writes the very same bytes to our workspace's input folder.

For every case the fixture records, per output node:
  images   shape [H, W, C], PIL mode, sha256 of the raw decoded pixel bytes, mean per channel, and the pixel values
           themselves when the image is at most 16x16 (fetched through /view)
  latents  shape, dtype float32, mean, sha256 of the float32 bytes of the `latent_tensor` of the .latent file
           (SaveLatent), and the values when there are at most 1024 of them
  ui       every other UI output verbatim (PreviewAny's `text`, ...)
and for failures the validation error and node_errors (POST /prompt's 400 answer) or the execution_error
(from /history). Output: tests/nodes/fixtures/comfyui_0_3_64/<family>.json (see --out-dir).

This file is our own code: it only speaks ComfyUI's HTTP API. It needs numpy, Pillow and safetensors.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import io
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT_DIR = REPO / "tests" / "nodes" / "fixtures" / "comfyui_0_3_64"
PIXELS_MAX_SIDE = 16  # images at most this wide and high keep their pixel values in the fixture
LATENT_VALUES_MAX = 1024  # latents with at most this many numbers keep their values


# -- what a fixture says about one output (shared with tests/nodes/comfyui_fixtures.py) -----------------


def describe_image(data: bytes) -> dict:
    """shape, mode, sha256 of the decoded pixel bytes (and the pixels when small) of an image file."""
    with Image.open(io.BytesIO(data)) as img:
        img.load()
        arr = np.asarray(img)
        mode = img.mode
    shape = list(arr.shape) if arr.ndim == 3 else [*arr.shape, 1]
    out = {
        "shape": shape,
        "mode": mode,
        "sha256": hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest(),
        "mean": [round(float(v), 4) for v in arr.reshape(-1, shape[2]).mean(axis=0)],
    }
    if shape[0] <= PIXELS_MAX_SIDE and shape[1] <= PIXELS_MAX_SIDE:
        out["pixels"] = arr.reshape(shape).tolist()
    return out


def describe_latent(data: bytes) -> dict:
    """shape, dtype and sha256 of the float32 bytes of a .latent (safetensors) file's latent tensor."""
    from safetensors.numpy import load

    tensors = load(data)
    key = "latent_tensor" if "latent_tensor" in tensors else next(iter(tensors))
    arr = np.ascontiguousarray(tensors[key].astype(np.float32))
    out = {
        "shape": list(arr.shape),
        "dtype": "float32",
        "sha256": hashlib.sha256(arr.tobytes()).hexdigest(),
        "mean": float(arr.mean()) if arr.size else 0.0,
    }
    if arr.size <= LATENT_VALUES_MAX:
        out["values"] = arr.reshape(-1).tolist()
    return out


def describe_validation_failure(error: dict | None, node_errors: dict | None) -> dict:
    """POST /prompt's 400 answer, tracebacks left out."""

    def clean(e: dict) -> dict:
        extra = dict(e.get("extra_info") or {})
        extra.pop("traceback", None)
        return {"type": e.get("type"), "message": e.get("message"), "details": e.get("details"), "extra_info": extra}

    nodes = {}
    for node_id, info in (node_errors or {}).items():
        nodes[node_id] = {
            "class_type": info.get("class_type"),
            "errors": [clean(e) for e in info.get("errors", [])],
            "dependent_outputs": sorted(info.get("dependent_outputs", [])),
        }
    return {"status": "validation_error", "error": clean(error or {}), "node_errors": nodes}


def describe_execution_error(data: dict) -> dict:
    return {
        "status": "execution_error",
        "execution_error": {k: data.get(k) for k in ("node_id", "node_type", "exception_type", "exception_message")},
    }


# -- deterministic input files ----------------------------------------------------------------------


def make_input_file(spec: dict) -> bytes:
    """A small input file whose content is a fixed function of its spec: a PNG whose pixels are a function
    of (x, y), or (generator "latent_wave", "shape": [B, C, H, W]) a .latent file as SaveLatent writes them."""
    if spec["generator"] == "latent_wave":
        from safetensors.numpy import save

        shape = [int(n) for n in spec["shape"]]
        i = np.arange(int(np.prod(shape)), dtype=np.float64)
        arr = (np.sin(i * 0.37) * 2.0 + (i % 7) * 0.125 - 0.4).astype(np.float32).reshape(shape)
        return save({"latent_tensor": arr, "latent_format_version_0": np.zeros((0,), np.float32)})
    w, h, kind = int(spec["width"]), int(spec["height"]), spec["generator"]
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1)).astype(np.uint8)
    g = (y * 255 // max(h - 1, 1)).astype(np.uint8)
    b = ((x * 37 + y * 91) % 256).astype(np.uint8)
    a = (((x + y) * 255) // max(w + h - 2, 1)).astype(np.uint8)
    if kind == "gradient_rgba":
        arr, mode = np.stack([r, g, b, a], -1), "RGBA"
    elif kind == "gradient_rgb":
        arr, mode = np.stack([r, g, b], -1), "RGB"
    elif kind == "gradient_l":
        arr, mode = b, "L"
    elif kind == "gradient_la":
        arr, mode = np.stack([b, a], -1), "LA"
    elif kind == "checker_rgb":
        c = (((x // 2 + y // 2) % 2) * 255).astype(np.uint8)
        arr, mode = np.stack([c, 255 - c, r], -1), "RGB"
    else:
        raise ValueError(f"unknown input generator {kind!r}")
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(arr), mode).save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


# -- talking to ComfyUI -----------------------------------------------------------------------------


class ComfyUI:
    def __init__(self, base_url: str, timeout: float = 120.0) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout
        self.client_id = str(uuid.uuid4())
        self.queued_node_errors: dict = {}

    def _open(self, path: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(self.base + path, data=data, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get_json(self, path: str) -> Any:
        status, body = self._open(path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}: {body[:500]!r}")
        return json.loads(body)

    def post_json(self, path: str, payload: Any) -> tuple[int, Any]:
        status, body = self._open(path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
        try:
            return status, json.loads(body) if body else None
        except json.JSONDecodeError:
            return status, body.decode(errors="replace")

    def upload_input(self, name: str, data: bytes) -> None:
        boundary = uuid.uuid4().hex
        parts = []
        for field, value in (("overwrite", "true"), ("type", "input")):
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"\r\n\r\n{value}\r\n'.encode())
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="{name}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n".encode()
            + data
            + b"\r\n"
        )
        parts.append(f"--{boundary}--\r\n".encode())
        status, body = self._open(
            "/upload/image", b"".join(parts), {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        )
        if status != 200:
            raise RuntimeError(f"upload of {name}: HTTP {status}: {body[:300]!r}")
        answer = json.loads(body)
        if answer.get("name") != name or answer.get("subfolder", ""):
            raise RuntimeError(f"upload of {name} was stored as {answer}")

    def view(self, item: dict) -> bytes:
        query = urllib.parse.urlencode(
            {"filename": item["filename"], "subfolder": item.get("subfolder", ""), "type": item.get("type", "output")}
        )
        status, body = self._open("/view?" + query)
        if status != 200:
            raise RuntimeError(f"/view {query}: HTTP {status}")
        return body

    def free(self) -> None:
        """Drop ComfyUI's caches before the next prompt, so every case really executes."""
        self.post_json("/free", {"unload_models": False, "free_memory": True})

    def run(self, prompt: dict, wait_s: float = 300.0) -> tuple[str, Any]:
        """('validation', 400 answer) or ('history', history entry)."""
        status, answer = self.post_json("/prompt", {"prompt": prompt, "client_id": self.client_id})
        if status == 400:
            return "validation", answer
        if status != 200 or not isinstance(answer, dict) or "prompt_id" not in answer:
            raise RuntimeError(f"POST /prompt: HTTP {status}: {answer}")
        self.queued_node_errors = answer.get("node_errors") or {}  # some outputs failed, others were queued
        prompt_id = answer["prompt_id"]
        deadline = time.time() + wait_s
        while time.time() < deadline:
            history = self.get_json(f"/history/{prompt_id}")
            entry = history.get(prompt_id)
            if (
                entry
                and entry.get("status", {}).get("completed") is not None
                and (entry["status"].get("status_str") in ("success", "error"))
            ):
                return "history", entry
            time.sleep(0.1)
        raise TimeoutError(f"prompt {prompt_id} did not finish in {wait_s} s")


def describe_outputs(outputs: dict, record: list[str] | None, fetch) -> dict:
    """{node_id: {images, latents, ui}} for the output nodes asked for (all when `record` is None)."""
    result = {}
    for node_id in record if record is not None else sorted(outputs):
        ui = outputs.get(node_id)
        if ui is None:
            result[node_id] = None
            continue
        entry: dict[str, Any] = {}
        other = {}
        for key, value in ui.items():
            if key == "images":
                entry["images"] = [describe_image(fetch(item)) for item in value]
            elif key == "latents":
                entry["latents"] = [describe_latent(fetch(item)) for item in value]
            else:
                other[key] = value
        if other:
            entry["ui"] = other
        result[node_id] = entry
    return result


def record_case(comfy: ComfyUI, case: dict) -> dict:
    comfy.free()
    kind, answer = comfy.run(case["prompt"])
    if kind == "validation":
        return describe_validation_failure(answer.get("error"), answer.get("node_errors"))
    entry = answer
    if entry["status"]["status_str"] == "error":
        err = next((data for event, data in entry["status"].get("messages", []) if event == "execution_error"), {})
        return describe_execution_error(err)
    result = {
        "status": "success",
        "outputs": describe_outputs(entry.get("outputs", {}), case.get("record"), comfy.view),
    }
    if comfy.queued_node_errors:
        result["node_errors"] = describe_validation_failure(None, comfy.queued_node_errors)["node_errors"]
    return result


def dump_fixture(fixture: dict) -> str:
    """Indented JSON with lists of numbers on one line and pixel rows one per line."""
    text = json.dumps(fixture, indent=1)
    flat = re.compile(r"\[\s+([-+\d.eE]+(?:,\s+[-+\d.eE]+)*)\s+\]")
    text = flat.sub(lambda m: "[" + ",".join(m.group(1).split()).replace(",,", ",") + "]", text)
    rows = re.compile(r"\[\s+(\[[^\[\]\n]*\](?:,\s+\[[^\[\]\n]*\])*)\s+\]")
    text = rows.sub(lambda m: "[" + ",".join(re.split(r",\s+(?=\[)", m.group(1))) + "]", text)
    return text + "\n"


def load_cases(path: Path) -> tuple[str, dict, list[dict]]:
    data = json.loads(path.read_text())
    if isinstance(data, list):
        return path.stem, {}, data
    return data.get("family", path.stem), data.get("input_files", {}), data["cases"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", type=Path, help="cases file (JSON)")
    ap.add_argument("--url", required=True, help="ComfyUI base URL, e.g. http://127.0.0.1:8188")
    ap.add_argument("--family", help="fixture name (default: the cases file's 'family' or its stem)")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    ap.add_argument("--comfyui-commit", default="", help="the commit the server runs (it does not say)")
    ap.add_argument(
        "--only", nargs="*", help="record only these case names, keeping the others from the existing fixture file"
    )
    args = ap.parse_args(argv)

    family, input_specs, cases = load_cases(args.cases)
    family = args.family or family
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        raise SystemExit("case names must be unique")
    comfy = ComfyUI(args.url)
    stats = comfy.get_json("/system_stats")
    object_info = comfy.get_json("/object_info")

    inputs = {}
    for name, spec in input_specs.items():
        data = make_input_file(spec)
        comfy.upload_input(name, data)
        inputs[name] = {
            "spec": spec,
            "sha256": hashlib.sha256(data).hexdigest(),
            "base64": base64.b64encode(data).decode(),
        }

    out_path = args.out_dir / f"{family}.json"
    previous = {}
    if args.only and out_path.exists():
        previous = {c["name"]: c for c in json.loads(out_path.read_text())["cases"]}

    recorded, problems = [], 0
    for case in cases:
        name = case["name"]
        if args.only and name not in args.only and name in previous:
            recorded.append(previous[name])
            continue
        missing = sorted({n["class_type"] for n in case["prompt"].values()} - set(object_info))
        if missing:
            raise SystemExit(f"case {name}: ComfyUI has no {missing}")
        expected = record_case(comfy, case)
        want = case.get("expect")
        flag = ""
        if want and want != expected["status"]:
            flag = f"  <-- expected {want}"
            problems += 1
        print(f"{name}: {expected['status']}{flag}", file=sys.stderr)
        if expected["status"] != "success":
            print(f"  {json.dumps({k: v for k, v in expected.items() if k != 'status'})[:400]}", file=sys.stderr)
        recorded.append({**{k: v for k, v in case.items() if k != "expected"}, "expected": expected})

    system = stats.get("system", {})
    fixture = {
        "comfyui": {
            "version": system.get("comfyui_version"),
            "commit": args.comfyui_commit,
            "pytorch_version": system.get("pytorch_version"),
            "python_version": (system.get("python_version") or "").split(" ")[0],
            "device": "cpu" if "--cpu" in system.get("argv", []) else (stats.get("devices") or [{}])[0].get("type"),
            "numpy_version": np.__version__,  # the recorder's, which decodes what ComfyUI saved
            "pillow_version": Image.__version__,
            "recorded_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
        "family": family,
        "input_files": inputs,
        "cases": recorded,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out_path.write_text(dump_fixture(fixture))
    print(f"wrote {out_path} ({len(recorded)} cases)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
