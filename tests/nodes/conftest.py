"""A fresh, active workspace per test for the nodes that read and write files."""

from __future__ import annotations

import pytest

from nodes import workspace as ws_module


@pytest.fixture
def workspace(tmp_path):
    previous = ws_module._active
    ws = ws_module.activate(ws_module.Workspace(tmp_path / "ws").create())
    yield ws
    ws_module._active = previous
