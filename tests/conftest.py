"""Shared fixtures: one workspace with the demo models per test session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory) -> "Workspace":
    """A workspace with the demo models and the example input image, built once per session."""
    from comfy_bridge.workspace import Workspace, activate
    from comfy_bridge.cli import ensure_demo_models
    root = Path(os.environ.get("COMFY_CLUSTER_TEST_WORKSPACE") or tmp_path_factory.mktemp("workspace"))
    ws = activate(Workspace(root).create())
    ensure_demo_models(ws)
    return ws


@pytest.fixture
def fixed_threads():
    """Bit-for-bit comparisons need one torch thread count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
