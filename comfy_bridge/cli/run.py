"""`comfy-cluster run`: execute one workflow file in-process with a progress bar per node."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from tqdm import tqdm

from comfy_bridge.cli.demo_models import ensure_demo_models
from comfy_bridge.cli.workspace_args import open_workspace
from nodes.workspace import Workspace

SEED_INPUTS = ("seed", "noise_seed")


class ConsoleSink:
    """A MessageSink for the command line: turns engine messages into progress bars and errors."""

    def __init__(self, show_progress: bool) -> None:
        self.client_id: str | None = None
        self.last_node_id: str | None = None
        self.show = show_progress
        self.bar: tqdm | None = None
        self.node_names: dict[str, str] = {}

    def send_sync(self, event: Any, data: Any, sid: str | None = None) -> None:
        if not isinstance(event, str):
            return  # binary previews have no place on a console
        if event == "executing":
            self._close()
            node = data.get("node")
            if node is not None and self.show:
                self.bar = tqdm(
                    total=1, desc=f"{node} {self.node_names.get(node, '')}".strip(), leave=True, unit="step"
                )
        elif event == "progress" and self.bar is not None:
            self.bar.total = data["max"]
            self.bar.n = data["value"]
            self.bar.refresh()
        elif event in ("execution_success", "execution_interrupted"):
            self._close()

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.n = self.bar.total
            self.bar.close()
            self.bar = None


def load_prompt(data: dict, registry) -> tuple[dict, dict | None]:
    """(API prompt, UI workflow or None) from a file's JSON in either format."""
    from comfy_bridge.formats import is_ui_format, ui_to_api

    if is_ui_format(data):
        return ui_to_api(data, registry), data
    if "prompt" in data and isinstance(data["prompt"], dict) and "class_type" not in data["prompt"]:
        return data["prompt"], data.get("extra_data", {}).get("extra_pnginfo", {}).get("workflow")
    return data, None


async def run_prompt(
    prompt: dict, workflow: dict | None, registry, show_progress: bool = True, all_outputs: bool = False
) -> list[Path]:
    """Validate and execute `prompt`; returns the image files its output nodes wrote. As ComfyUI does, the
    outputs that pass validation run and the others are left out with their errors logged; with `all_outputs`
    an output that fails validation fails the run (a render that must show every output ran)."""
    from cluster.local import SharedCompute
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.validation import validate_prompt
    from nodes.workspace import active

    # Sync node bodies run on the ModelFn thread too: one torch OpenMP team per process (see cluster.local).
    asyncio.get_running_loop().set_default_executor(SharedCompute())
    prompt_id = str(uuid.uuid4())
    valid, error, outputs, node_errors = await validate_prompt(registry, prompt_id, prompt, None)
    if not valid:
        raise SystemExit(f"invalid prompt: {json.dumps(error)}\n{json.dumps(node_errors, indent=1)}")
    if all_outputs and node_errors:
        raise SystemExit(f"invalid prompt: outputs failed validation\n{json.dumps(node_errors, indent=1)}")
    sink = ConsoleSink(show_progress)
    sink.node_names = {k: v.get("class_type", "") for k, v in prompt.items()}
    executor = PromptExecutor(registry, sink)
    extra = {"extra_pnginfo": {"workflow": workflow}} if workflow else {}
    await executor.execute_async(prompt, prompt_id, extra, outputs)
    if not executor.success:
        err = next((data for event, data in executor.status_messages if event == "execution_error"), {})
        raise SystemExit(f"node {err.get('node_id')} ({err.get('node_type')}): {err.get('exception_message')}")
    ws = active()
    files = []
    for ui in executor.history_result.get("outputs", {}).values():
        for image in ui.get("images", []):
            base = {"output": ws.output_dir, "temp": ws.temp_dir, "input": ws.input_dir}[image.get("type", "output")]
            files.append(base / image.get("subfolder", "") / image["filename"])
    return files


def run_workflow_file(path: Path, ws: Workspace, seed: int | None = None, progress: bool = True) -> list[Path]:
    from comfy_bridge.registry import build_registry

    registry = build_registry(ws)
    prompt, workflow = load_prompt(json.loads(path.read_text()), registry)
    if seed is not None:
        for node in prompt.values():
            for name in SEED_INPUTS:
                if isinstance(node.get("inputs", {}).get(name), int):
                    node["inputs"][name] = seed
    from cluster.local import run_on_compute
    from nodes.progress import interrupt  # Ctrl-C stops the prompt at its next check

    return run_on_compute(lambda: run_prompt(prompt, workflow, registry, progress), on_interrupt=interrupt)


def cmd_run(args: argparse.Namespace) -> int:
    ws = open_workspace(args)
    ensure_demo_models(ws)
    if args.threads:
        from cluster.local import set_threads

        set_threads(args.threads)
    images = run_workflow_file(Path(args.workflow), ws, seed=args.seed, progress=not args.quiet)
    for image in images:
        print(image)
    return 0 if images else 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run a workflow file (API or UI format) and write its images")
    run.add_argument("workflow")
    run.add_argument("--workspace", default=None)
    run.add_argument("--seed", type=int, default=None, help="override every seed widget")
    run.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    run.add_argument("--quiet", action="store_true")
    run.set_defaults(func=cmd_run)
