"""`-p comfy_bridge.compat.pytest_plugin` lets a client test process import ComfyUI's module names (ComfyUI's
execution tests build prompts with `comfy_execution.graph_utils.GraphBuilder` in the test process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

CLIENT_TEST = textwrap.dedent("""
    from comfy_execution.graph_utils import GraphBuilder

    def test_builds_with_our_graph_builder():
        g = GraphBuilder(prefix="t")
        node = g.node("SaveImage", images=[\"1\", 0])
        assert GraphBuilder.__module__.startswith("comfy_bridge.")
        assert g.finalize() == {node.id: {"class_type": "SaveImage", "inputs": {"images": ["1", 0]}}}
""")


def run_pytest(folder: Path, *plugin: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *plugin,
            "--rootdir",
            str(folder),
            "-c",
            str(folder / "pytest.ini"),
            str(folder),
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plugin_makes_graph_utils_importable_in_the_test_process(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_client.py").write_text(CLIENT_TEST)
    with_plugin = run_pytest(tmp_path, "-p", "comfy_bridge.compat.pytest_plugin")
    assert with_plugin.returncode == 0, with_plugin.stdout + with_plugin.stderr
    assert "1 passed" in with_plugin.stdout
