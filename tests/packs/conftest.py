"""A workspace whose custom_nodes hold the fixture packs (and, through extra_model_paths.yaml, a second
custom_nodes folder and the demo models), a registry built from it, and a prompt runner."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from nodes import workspace
from nodes.workspace import Workspace, activate

FIXTURES = Path(__file__).parent / "fixture_packs"

EXTRA_PACK = textwrap.dedent("""
    class ExtraDouble:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"image": ("IMAGE",)}}
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "run"
        CATEGORY = "extra"

        def run(self, image):
            return (image * 2.0,)

    NODE_CLASS_MAPPINGS = {"ExtraDouble": ExtraDouble}
""")


class RecordingSink:
    def __init__(self) -> None:
        self.client_id: str | None = "tester"
        self.last_node_id: str | None = None
        self.messages: list[tuple] = []

    def send_sync(self, event, data, sid=None) -> None:
        self.messages.append((event, data, sid))

    def events(self, name: str) -> list:
        return [d for e, d, _ in self.messages if e == name]


@pytest.fixture(scope="session")
def packs_ws(tmp_path_factory, demo_workspace) -> Workspace:
    root = tmp_path_factory.mktemp("packs_ws")
    shutil.copytree(FIXTURES, root / "custom_nodes")
    extra = root / "more_nodes"
    extra.mkdir()
    (extra / "extra_pack.py").write_text(EXTRA_PACK)
    (root / "extra_model_paths.yaml").write_text(
        textwrap.dedent(f"""
        demo:
            base_path: {demo_workspace.models_dir}
            checkpoints: checkpoints
            vae: vae
            loras: loras
        mine:
            base_path: {root}
            custom_nodes: more_nodes
    """)
    )
    return Workspace(root).create()


@pytest.fixture(scope="module", autouse=True)
def _restore_globals_packs_extend():
    """Packs extend process-wide lists when imported (a scheduler, the node mappings), as they do in a
    server; tests share one process, so each module gives those lists back as it found them."""
    import nodes
    from nodes.sampling import schedules

    saved = (dict(schedules.SCHEDULERS), list(schedules.SCHEDULER_NAMES), dict(nodes.NODE_CLASS_MAPPINGS))
    yield
    schedules.SCHEDULERS.clear()
    schedules.SCHEDULERS.update(saved[0])
    schedules.SCHEDULER_NAMES[:] = saved[1]
    nodes.NODE_CLASS_MAPPINGS.clear()
    nodes.NODE_CLASS_MAPPINGS.update(saved[2])


@pytest.fixture(scope="module")
def packs_registry(packs_ws):
    from comfy_bridge.registry import build_registry

    before = workspace._active
    activate(packs_ws)
    yield build_registry(packs_ws)
    workspace._active = before  # later modules find the workspace they had (the demo one)


@pytest.fixture(autouse=True)
def _active_packs_ws(request):
    if "packs_ws" not in request.fixturenames:
        yield
        return
    before = workspace._active
    activate(request.getfixturevalue("packs_ws"))
    yield
    workspace._active = before


async def run_prompt(registry, prompt: dict, runtime=None, prompt_id: str = "p"):
    """Validate and execute; returns (executor, sink)."""
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.validation import validate_prompt

    valid, error, outputs, node_errors = await validate_prompt(registry, prompt_id, prompt, None)
    assert valid, (error, node_errors)
    sink = RecordingSink()
    executor = (
        PromptExecutor(registry, sink, runtime=runtime) if runtime is not None else PromptExecutor(registry, sink)
    )
    await executor.execute_async(prompt, prompt_id, {}, outputs)
    return executor, sink


def error_of(executor) -> dict:
    errors = [d for e, d in executor.status_messages if e == "execution_error"]
    assert errors, "expected an execution_error"
    return errors[0]


def output(executor, node_id: str, slot: int = 0):
    """The first value of output `slot` of a node, from the executor's output cache."""
    data = executor.caches.outputs.get(node_id)
    data = getattr(data, "outputs", data)
    return data[slot][0]


def image(node_id: str = "img", size: int = 8, color: int = 0) -> dict:
    return {
        node_id: {
            "class_type": "EmptyImage",
            "inputs": {"width": size, "height": size, "batch_size": 1, "color": color},
        }
    }
