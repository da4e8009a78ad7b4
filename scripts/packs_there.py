"""The "there" side of scripts/packs_today.py: each pack on real ComfyUI, beside the same pack here (issue 40).

For one pack whose "here" side packs_today.py has just measured, in the pack's venv:

- the environment: a copy of the pack's venv (the project's own install plus the pack's requirements) less
  comfy-cluster itself, plus ComfyUI's requirements.txt (torch pinned to the venv's; torchvision, torchaudio and
  spandrel as /work/shared/reference/running-real-comfyui.md says); the pack's venv itself is left as it was;
- ComfyUI (`--comfyui`, a checkout or an unpacked release) started with `--base-directory` holding only this pack
  in custom_nodes and the models of the pack's workspace. `launch` runs its main.py unchanged and only watches:
  after each prompt it writes the digest of the case node's outputs (the executor's output cache, as the "here"
  probe reads ours), and after the routes are added it writes the pack's routes (those whose handler's code lies
  in the pack's folder);
- our server (`comfy-cluster serve`) on the pack's workspace;
- compared: the import (ComfyUI's import log), the pack's /object_info entries whole but for prose (PROSE), each
  GET route of the pack without path parameters by body where ComfyUI answers it the same twice (by status
  where not), and the recorded case (POSTed to ComfyUI's /prompt) by the digest of its outputs.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.abc
import importlib.util
import inspect
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

# Keys whose values are prose a port may word its own way (issue 40): descriptions and tooltips.
PROSE = frozenset({"description", "tooltip", "output_tooltips"})
# ComfyUI's requirements that are not installed from its requirements.txt (running-real-comfyui.md): torch stays
# the venv's, and these are installed without their dependencies (their pins would replace torch).
NOT_FROM_REQUIREMENTS = ("torch", "torchvision", "torchaudio", "spandrel")
NO_DEPS = ("spandrel", "torchvision==0.28.0", "requests")
# torchvision's PyPI wheel is a CUDA build: its C ops cannot load beside the CPU torch; declaring their schemas
# lets `import torchvision` succeed (ComfyUI imports it unconditionally).
TORCHVISION_SHIM = """import torch
_lib = torch.library.Library("torchvision", "DEF")
_lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_lib.define("qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor")
"""
READY_TIMEOUT_S = 420
CASE_TIMEOUT_S = 240
DIFFS_KEPT = 6


# -- comparisons (pure) -----------------------------------------------------------------------------------------


def strip_prose(value: Any) -> Any:
    """value without the PROSE keys, at any depth."""
    if isinstance(value, dict):
        return {k: strip_prose(v) for k, v in value.items() if k not in PROSE}
    if isinstance(value, (list, tuple)):
        return [strip_prose(v) for v in value]
    return value


def differences(here: Any, there: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as paths ("input.required.image[1].default: 1 != 2"); [] when equal."""
    if isinstance(here, dict) and isinstance(there, dict):
        out = []
        for key in list(there) + [k for k in here if k not in there]:
            where = f"{path}.{key}" if path else str(key)
            if key not in here:
                out.append(f"{where}: only there")
            elif key not in there:
                out.append(f"{where}: only here")
            else:
                out += differences(here[key], there[key], where)
        if not out and list(here) != list(there):  # ComfyUI's key order is part of what a client reads
            out.append(f"{path or '(entry)'}: key order {list(here)[:8]} != {list(there)[:8]}")
        return out
    if isinstance(here, list) and isinstance(there, list) and len(here) == len(there):
        return [d for i, (a, b) in enumerate(zip(here, there)) for d in differences(a, b, f"{path}[{i}]")]
    if here == there and type(here) is type(there):
        return []
    return [f"{path or '(entry)'}: {json.dumps(here)[:160]} != {json.dumps(there)[:160]}"]


def entry_sha(entry: Any) -> str:
    return hashlib.sha256(json.dumps(strip_prose(entry)).encode()).hexdigest()[:16]


def pack_entries(object_info: dict, folder: str) -> dict:
    """The /object_info entries of the pack's nodes: those whose python_module is the pack's."""
    module = f"custom_nodes.{folder}"
    return {
        name: entry
        for name, entry in object_info.items()
        if isinstance(entry, dict)
        and (entry.get("python_module") == module or str(entry.get("python_module", "")).startswith(module + "."))
    }


def compare_nodes(here: dict, there: dict) -> dict:
    """The pack's entries compared whole, prose aside: equal is counted of ComfyUI's entries (the m of n of m)."""
    diffs = {}
    for name in sorted(set(here) | set(there)):
        if name not in there:
            diffs[name] = ["only here"]
        elif name not in here:
            diffs[name] = ["only there"]
        elif found := differences(strip_prose(here[name]), strip_prose(there[name])):
            diffs[name] = found

    # entries that differ only by top-level keys one side lacks: fields another ComfyUI version added or dropped
    def top_level(d: str) -> bool:
        return d.endswith((": only here", ": only there")) and "." not in d.split(":")[0] and "[" not in d

    lacking = [n for n, d in diffs.items() if n in there and n in here and all(top_level(x) for x in d)]
    keys = sorted({x for d in diffs.values() for x in d if top_level(x)})
    return {
        "equal": sum(name in here and name not in diffs for name in there),
        "of": len(there),
        "equal_but_keys_one_side_lacks": len(lacking),
        "keys_one_side_lacks": {k: sum(k in d for d in diffs.values()) for k in keys},
        "here": {name: entry_sha(e) for name, e in sorted(here.items())},
        "there": {name: entry_sha(e) for name, e in sorted(there.items())},
        "differences": {name: d[:DIFFS_KEPT] for name, d in diffs.items()},
    }


def same_body(a: bytes, b: bytes) -> bool:
    """Bodies are the same when their bytes are, or both are JSON of equal values (spacing aside)."""
    if a == b:
        return True
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return False


def compare_route(here: tuple[int, bytes], there: tuple[int, bytes], there_again: tuple[int, bytes]) -> dict:
    """A GET route compared by body when ComfyUI answers it the same twice (deterministic), else by status. A side
    that gave no HTTP answer (status 0: the server is gone, or the connection failed) makes it "no answer", never
    equal: two dead servers answer alike."""
    deterministic = there[0] == there_again[0] and same_body(there[1], there_again[1])
    equal = here[0] == there[0] and (same_body(here[1], there[1]) if deterministic else True)
    answered = here[0] != 0 and there[0] != 0 and there_again[0] != 0
    return {
        "by": ("body" if deterministic else "status") if answered else "no answer",
        "equal": equal and answered,
        "here": {"status": here[0], "bytes": len(here[1]), "sha256": hashlib.sha256(here[1]).hexdigest()[:16]},
        "there": {"status": there[0], "bytes": len(there[1]), "sha256": hashlib.sha256(there[1]).hexdigest()[:16]},
    }


def import_outcome(log: str, folder: str) -> bool | None:
    """From ComfyUI's "Import times for custom nodes" lines: True when the pack's folder imported, False when it
    failed, None when the log names it not at all (ComfyUI did not get as far)."""
    pattern = re.compile(r"^\s*[\d.]+ seconds( \(IMPORT FAILED\))?: (.+)$")
    for line in log.splitlines():
        m = pattern.match(line)
        if m and Path(m.group(2).strip()).name == folder:
            return m.group(1) is None
    return None


def compare_case(here: dict | None, there: dict | None) -> bool | None:
    """Equal outputs (digest of every output, and the UI output) of the same case; None when a side has none."""
    if not here or not there or not there.get("ok"):
        return None
    return here.get("outputs") == there.get("outputs") and here.get("ui") == there.get("ui")


# -- ComfyUI's origin -----------------------------------------------------------------------------------------------


def comfyui_origin(comfyui: Path) -> dict:
    """The ComfyUI version and commit, read from the checkout (git), or from its version file when it is not one;
    with the sha256 of its core files, so a recording's origin can be told from the files."""
    rev = subprocess.run(["git", "-C", str(comfyui), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    version = re.search(r'__version__\s*=\s*"([^"]+)"', (comfyui / "comfyui_version.py").read_text())
    files = ("main.py", "server.py", "execution.py", "nodes.py", "comfyui_version.py")
    tree = hashlib.sha256(b"".join((comfyui / f).read_bytes() for f in files)).hexdigest()[:16]
    return {
        "path": str(comfyui),
        "version": version.group(1) if version else None,
        "commit": rev.stdout.strip() if rev.returncode == 0 else None,
        "read_from": "git rev-parse HEAD" if rev.returncode == 0 else "comfyui_version.py (not a git checkout)",
        "core_files_sha256": {"files": list(files), "sha256": tree},
    }


# -- launch: runs ComfyUI's main.py inside the "there" venv, watching ---------------------------------------------


def _record(path: Path, item: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(item, default=str) + "\n")


def _handler_file(handler: Any) -> str:
    handler = inspect.unwrap(handler)
    call = next((vars(k)["__call__"] for k in type(handler).__mro__ if "__call__" in vars(k)), None)
    code = getattr(handler, "__code__", None) or getattr(call, "__code__", None)  # a function, or a callable object
    return str(Path(code.co_filename).resolve()) if code else ""


def _watch(module: Any, record: Path, pack_dir: Path) -> None:
    """Wrap (never change) what ComfyUI does: the executor's run of a prompt, and the server's add_routes."""
    if module.__name__ == "execution":
        run = module.PromptExecutor.execute_async
        today = _sibling("packs_today")

        async def execute_async(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):  # noqa: B006
            await run(self, prompt, prompt_id, extra_data, execute_outputs)
            data = self.caches.outputs.get("node")
            data = getattr(data, "outputs", data)
            ui = (getattr(self, "history_result", None) or {}).get("outputs", {}).get("node")
            _record(
                record,
                {
                    "kind": "case",
                    "prompt_id": prompt_id,
                    "ok": bool(self.success) and data is not None,
                    "outputs": today.digest(list(data)) if data is not None else None,
                    "ui": today.digest(ui) if ui else None,
                },
            )

        module.PromptExecutor.execute_async = execute_async
    elif module.__name__ == "server":
        add = module.PromptServer.add_routes

        def add_routes(self):
            add(self)
            inside = str(pack_dir.resolve()) + os.sep
            routes = [
                {"method": r.method, "path": r.resource.canonical}
                for r in self.app.router.routes()
                # HEAD: aiohttp's own twin of each GET route
                if r.resource is not None and r.method != "HEAD" and _handler_file(r.handler).startswith(inside)
            ]
            _record(record, {"kind": "routes", "routes": routes})
            threading.Thread(target=_queue_cases, args=(self, record), daemon=True).start()

        module.PromptServer.add_routes = add_routes


def _queue_cases(server: Any, record: Path) -> None:
    """Queue the case the harness asks for (a file beside the record) on ComfyUI's own prompt queue, its outputs
    ["node"]: what /prompt queues for an output node; a case node that is no output node /prompt refuses ("Prompt
    has no outputs"), where the "here" probe runs it as the one node to execute. Validated first by ComfyUI's
    validate_inputs, as /prompt validates each output."""
    execution, asked, done = sys.modules["execution"], record.with_suffix(".case.json"), set()
    while True:
        time.sleep(1)
        if not asked.is_file() or (case := json.loads(asked.read_text()))["prompt_id"] in done:
            continue
        done.add(case["prompt_id"])
        check = execution.validate_inputs(case["prompt_id"], case["prompt"], "node", {})
        valid, errors, _ = asyncio.run_coroutine_threadsafe(check, server.loop).result(timeout=300)
        if not valid:
            _record(record, {"kind": "case", "prompt_id": case["prompt_id"], "ok": False, "why": f"invalid: {errors}"})
            continue
        server.number += 1
        extra = {"create_time": int(time.time() * 1000)}
        server.prompt_queue.put((server.number, case["prompt_id"], case["prompt"], extra, ["node"], {}))


@functools.cache
def _sibling(name: str) -> Any:
    """A script of this folder, by path (packs_today's digests, packs_check's route rule)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before it runs: packs_check's dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class _Watcher(importlib.abc.MetaPathFinder):
    def __init__(self, record: Path, pack_dir: Path) -> None:
        self.record, self.pack_dir, self.left = record, pack_dir, {"execution", "server"}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.left:
            return None
        self.left.discard(name)
        spec = importlib.util.find_spec(name)
        exec_module = spec.loader.exec_module

        def watched(module: Any) -> None:
            exec_module(module)
            _watch(module, self.record, self.pack_dir)

        spec.loader.exec_module = watched
        return spec


def cmd_launch(comfyui: Path, record: Path, pack_dir: Path, argv: list[str]) -> None:
    import runpy

    sys.meta_path.insert(0, _Watcher(record, pack_dir))
    sys.argv = [str(comfyui / "main.py"), *argv]
    sys.path.insert(0, str(comfyui))
    runpy.run_path(str(comfyui / "main.py"), run_name="__main__")


# -- the run of one pack --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, data: dict | None = None, timeout: float = 60) -> tuple[int, bytes]:
    body = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - localhost servers this script started
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except (urllib.error.URLError, OSError) as err:
        return 0, f"{type(err).__name__}: {err}".encode()


def wait_ready(base: str, proc: subprocess.Popen, timeout: float = READY_TIMEOUT_S) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        if http(f"{base}/system_stats", timeout=10)[0] == 200:
            return True
        time.sleep(2)
    return False


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def there_venv(pack_venv: Path, dest: Path, comfyui: Path, env: dict) -> dict:
    """A copy of the pack's venv less comfy-cluster, plus ComfyUI's requirements; what pip said."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(pack_venv), str(dest)], check=True)
    python = str(dest / "bin" / "python")
    torch = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=False
    ).stdout.strip()
    reqs = [
        line
        for line in (comfyui / "requirements.txt").read_text().splitlines()
        if line.strip()
        and not line.startswith("#")
        and re.split(r"[<>=~! ]", line.strip())[0] not in NOT_FROM_REQUIREMENTS
    ]
    (dest / "comfyui-requirements.txt").write_text("\n".join(reqs) + "\n")
    (dest / "constraints.txt").write_text(f"torch=={torch.split('+')[0]}\n")
    started, out = time.time(), []
    steps = (
        ["uninstall", "-y", "comfy-cluster"],
        ["install", "-r", str(dest / "comfyui-requirements.txt"), "-c", str(dest / "constraints.txt")],
        ["install", "--no-deps", *NO_DEPS],
    )
    ok = True
    for step in steps:
        done = subprocess.run(
            [python, "-m", "pip", "-q", *step], capture_output=True, text=True, env=env, timeout=900, check=False
        )
        ok = ok and done.returncode == 0
        out.append(f"$ pip {' '.join(step)}: rc {done.returncode}\n{(done.stdout + done.stderr)[-600:]}")
    shim = dest / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(TORCHVISION_SHIM)
    return {
        "made_from": "the pack's venv (hard-linked copy) less comfy-cluster, plus ComfyUI's requirements.txt",
        "ok": ok,
        "seconds": round(time.time() - started, 1),
        "pip": "\n".join(out)[-2000:],
    }


def comfyui_base(ws: Path, folder: str, dest: Path) -> Path:
    """ComfyUI's --base-directory: only this pack (copied as installed) in custom_nodes, the workspace's models."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "custom_nodes").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(ws / "custom_nodes" / folder), str(dest / "custom_nodes" / folder)], check=True)
    (dest / "models").symlink_to((ws / "models").resolve())
    for sub in ("output", "user", "temp"):
        (dest / sub).mkdir()
    # the workspace's input files (our workspace starts with example files): nodes list them in /object_info
    subprocess.run(["cp", "-a", str(ws / "input"), str(dest / "input")], check=True)
    return dest


def requested(route: dict) -> bool:
    """Whether a route of the pack is asked: GET routes without path parameters that name no action (packs_check's
    rule: Manager's and Easy-Use's GET /reboot restart the server, Manager's /snapshot/save writes files)."""
    return (
        route["method"] == "GET" and "{" not in route["path"] and not _sibling("packs_check").is_action(route["path"])
    )


def server_side(base: str, folder: str, routes: list[dict]) -> dict:
    """What one server answers: the pack's /object_info entries, and each requested route (twice)."""
    status, body = http(f"{base}/object_info", timeout=300)
    info = json.loads(body) if status == 200 else {}
    answers = {}
    for route in routes:
        if requested(route):
            answers[route["path"]] = [http(base + route["path"], timeout=60) for _ in range(2)]
    return {"object_info_status": status, "entries": pack_entries(info, folder), "answers": answers}


def run_there(pack: dict, venv: Path, ws: Path, work: Path, comfyui: Path, here_case: dict | None, env: dict) -> dict:
    """The "there" side of one pack and its comparison with the "here" side (our server on the same workspace)."""
    folder, there_dir = pack["folder"], work / "there" / pack["folder"]
    # both servers iterate sets of strings in one order (VHS lists file extensions from a set)
    env = {**env, "PYTHONHASHSEED": "0"}
    there_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"comfyui": comfyui_origin(comfyui)}
    tvenv = work / "venvs-there" / folder
    out["environment"] = there_venv(venv, tvenv, comfyui, env)
    base_dir = comfyui_base(ws, folder, there_dir / "base")
    record, log = there_dir / "record.jsonl", there_dir / "comfyui.log"
    record.unlink(missing_ok=True)
    port = free_port()
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [str(tvenv / "bin" / "python"), str(Path(__file__).resolve()), "launch", str(comfyui), str(record),
             str(base_dir / "custom_nodes" / folder), "--", "--cpu", "--listen", "127.0.0.1", "--port", str(port),
             "--base-directory", str(base_dir), "--disable-auto-launch", "--disable-api-nodes"],
            stdout=log_file, stderr=subprocess.STDOUT, env={**env, "PYTHONPATH": str(tvenv / "shim")},
            cwd=there_dir, start_new_session=True,
        )  # fmt: skip
    try:
        ready = wait_ready(f"http://127.0.0.1:{port}", proc)
        text = log.read_text(errors="replace")
        out["imported"] = import_outcome(text, folder) if ready else False
        out["ready"] = ready
        out["import_log"] = [ln for ln in text.splitlines() if folder in ln or "IMPORT FAILED" in ln][:20]
        if not out["imported"]:
            out["log_tail"] = text[-3000:]
        routes = next((json.loads(ln)["routes"] for ln in record.open() if '"routes"' in ln), []) if ready else []
        out["routes_found"] = routes
        there = server_side(f"http://127.0.0.1:{port}", folder, routes) if ready else None
        out["case"] = run_case_there(f"http://127.0.0.1:{port}", record, here_case) if ready and here_case else None
    finally:
        out["exited_before_stop"] = proc.poll()  # None: it was still serving when the harness stopped it
        stop(proc)
    here = here_server(venv, ws, folder, routes if there else [], env)
    here_answers = here.get("answers", {})
    out["here_server"] = {k: here[k] for k in ("ready", "object_info_status")}
    out["nodes"] = compare_nodes(here.get("entries", {}), there["entries"]) if there else None
    out["routes"] = (
        {
            path: compare_route(here_answers.get(path, [(0, b"")])[0], *answers)
            for path, answers in there["answers"].items()
        }
        if there
        else None
    )
    out["routes_not_requested"] = [r for r in routes if not requested(r)]
    if out["case"] is not None:
        out["case"]["equal"] = compare_case(here_case, out["case"])
    shutil.rmtree(tvenv, ignore_errors=True)
    shutil.rmtree(base_dir, ignore_errors=True)
    return out


def run_case_there(base: str, record: Path, here_case: dict) -> dict:
    """POST the "here" case's prompt to ComfyUI; the digest of its outputs, from the watcher's record."""
    result: dict[str, Any] = {"node": here_case["node"], "ok": False, "queued_by": "/prompt"}
    status, body = http(
        f"{base}/prompt",
        {"prompt": here_case["prompt"], "client_id": uuid.uuid4().hex, "partial_execution_targets": ["node"]},
    )
    if status == 400 and b"prompt_no_outputs" in body:  # not an output node: queued as the here probe runs it
        prompt_id, result["queued_by"] = uuid.uuid4().hex, "the watcher (no output node: /prompt refuses it)"
        record.with_suffix(".case.json").write_text(json.dumps({"prompt_id": prompt_id, "prompt": here_case["prompt"]}))
    elif status != 200:
        result["why"] = f"/prompt answered {status}: {body[:400].decode(errors='replace')}"
        return result
    else:
        prompt_id = json.loads(body)["prompt_id"]
    deadline = time.time() + CASE_TIMEOUT_S
    while time.time() < deadline:
        found = [json.loads(ln) for ln in record.open() if prompt_id in ln]
        if found:
            status, body = http(f"{base}/history/{prompt_id}")
            history = json.loads(body).get(prompt_id, {}) if status == 200 else {}
            messages = history.get("status", {}).get("messages", [])
            error = next((m[1] for m in messages if m[0] == "execution_error"), None)
            result.update({k: found[0].get(k) for k in ("ok", "outputs", "ui", "why") if k in found[0]})
            if error:
                result["why"] = f"{error.get('exception_type')}: {str(error.get('exception_message')).strip()[:300]}"
            return result
        time.sleep(1)
    result["why"] = f"no result in {CASE_TIMEOUT_S} s"
    return result


def here_server(venv: Path, ws: Path, folder: str, routes: list[dict], env: dict) -> dict:
    """Our server (`comfy-cluster serve`, one executor) on the pack's workspace: its /object_info and routes."""
    port = free_port()
    log = ws.parent / f"{folder}.serve.log"
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [str(venv / "bin" / "python"), "-m", "comfy_bridge.cli", "serve", "--workspace", str(ws), "--listen",
             "127.0.0.1", "--port", str(port), "--cpu", "--executors", "1"],
            stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=ws.parent, start_new_session=True,
        )  # fmt: skip
    try:
        ready = wait_ready(f"http://127.0.0.1:{port}", proc)
        side = server_side(f"http://127.0.0.1:{port}", folder, routes) if ready else {"object_info_status": None}
    finally:
        stop(proc)
    return {"ready": ready, **side}


if __name__ == "__main__" and sys.argv[1:2] == ["launch"]:
    comfyui_dir, record_file, pack_folder, sep, *rest = sys.argv[2:]
    cmd_launch(Path(comfyui_dir), Path(record_file), Path(pack_folder), rest)
