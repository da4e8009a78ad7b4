"""A pack node gets the same inputs, and fails with the same execution_error, whether it runs in the
server's process (`serve --executors 0`) or whole on an executor (the default): rgthree's Power Puter
pattern (an empty `optional` dict claiming every name, so the web UI's `code` widget is an input, and the
hidden inputs), and exceptions with their own type, message and the node's frames in the traceback."""

from __future__ import annotations

import pytest

from cluster.executor.local_cluster import start_local_cluster

from .conftest import error_of, output, run_prompt

MODES = ["in_process", "executor"]


@pytest.fixture(scope="module")
def cluster():
    head, rt = start_local_cluster(1, threads_per_executor=1)
    yield head, rt
    head.stop()


def _runtime(mode: str, cluster) -> object | None:
    return cluster[1] if mode == "executor" else None


@pytest.mark.parametrize("mode", MODES)
async def test_every_input_reaches_a_power_puter_like_node(packs_registry, cluster, mode):
    prompt = {
        "pp": {"class_type": "FlexiblePuter", "inputs": {"code": "a + 1", "a": 3, "b": "s"}},
        "show": {"class_type": "V1ShowText", "inputs": {"text": ["pp", 0]}},
    }
    executor, _ = await run_prompt(packs_registry, prompt, runtime=_runtime(mode, cluster), prompt_id=f"pp-{mode}")
    assert executor.success, executor.status_messages
    # the widget, the dynamic inputs, PROMPT and DYNPROMPT (which name the node), EXTRA_PNGINFO (none given)
    assert output(executor, "pp") == "a + 1|True|FlexiblePuter|None|a,b"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "node, exception_type, message",
    [
        ("TypeErrorNode", "TypeError", "flexible_inputs_pack cannot take 'q'"),
        ("PackFailureNode", ".PackFailure", "q: the pack's own exception"),
    ],
)
async def test_a_pack_exception_keeps_its_type_message_and_frames(
    packs_registry, cluster, mode, node, exception_type, message
):
    prompt = {
        "e": {"class_type": node, "inputs": {"text": "q"}},
        "show": {"class_type": "V1ShowText", "inputs": {"text": ["e", 0]}},
    }
    executor, _ = await run_prompt(
        packs_registry, prompt, runtime=_runtime(mode, cluster), prompt_id=f"err-{mode}-{node}"
    )
    assert not executor.success
    error = error_of(executor)
    # builtins by name; a pack's class by its module (the pack's file path, as the head imported it) and name
    assert error["exception_type"] == exception_type or (
        exception_type.startswith(".") and error["exception_type"].endswith("flexible_inputs_pack" + exception_type)
    )
    assert error["exception_message"].strip() == message
    assert "flexible_inputs_pack.py" in error["traceback"][-1] and "raise" in error["traceback"][-1]
    assert error["node_id"] == "e" and error["node_type"] == node
