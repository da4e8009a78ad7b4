"""`serve`'s Ray flags refuse what they cannot mean, with exit code 2 and a message naming the flag, before
anything starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize(
    "flags,says",
    [
        (["--ray", "--ray-autoscale", "3:1"], "--ray-autoscale 3:1: give LOW:HIGH"),
        (["--ray", "--ray-autoscale", "two"], "--ray-autoscale two: give LOW:HIGH"),
        (["--ray-autoscale", "0:2"], "--ray-autoscale needs --ray"),
    ],
)
def test_a_bad_ray_flag_is_refused_by_name(flags, says, tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "comfy_bridge.cli", "serve", "--workspace", str(tmp_path), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert says in run.stderr
