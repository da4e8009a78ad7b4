"""Where `serve` keeps its queue and history: --state-db, else $COMFY_CLUSTER_STATE_DB, else the workspace's
SQLite file; "memory" keeps them in the process only, as ComfyUI does."""

import argparse

import pytest

from comfy_bridge.cli.serve import state_db_choice


@pytest.mark.parametrize(
    "flag, env, expected",
    [
        (None, None, True),
        ("/data/state.sqlite3", None, "/data/state.sqlite3"),
        (None, "/env/state.sqlite3", "/env/state.sqlite3"),
        ("/data/state.sqlite3", "memory", "/data/state.sqlite3"),
        (None, "memory", None),
        ("memory", None, None),
    ],
)
def test_flag_then_environment_then_workspace_file(monkeypatch, flag, env, expected):
    if env is None:
        monkeypatch.delenv("COMFY_CLUSTER_STATE_DB", raising=False)
    else:
        monkeypatch.setenv("COMFY_CLUSTER_STATE_DB", env)
    assert state_db_choice(argparse.Namespace(state_db=flag)) == expected
