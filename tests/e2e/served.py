"""What the template e2e tests share: serve a workspace in one executor mode, render a workflow on it, check that
the default executors and `--executors 0` give the same image, and compare with ComfyUI's recorded image."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from tests.conftest import free_port
from tests.demo_models_once import seed_demo_models
from tests.e2e.test_samplers_on_executors import render_on_server
from tests.recorded_tensors import at_recorded, pixels

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def serving(workspace: Path, log_path: Path, *flags: str) -> Iterator[str]:
    """`comfy-cluster serve` on the workspace (its log in log_path) until the block ends; yields its base URL.
    A fresh workspace gets the demo models first (seed_demo_models), as serve's first start would build them."""
    seed_demo_models(workspace)
    port = free_port()
    cmd = [sys.executable, "-m", "comfy_bridge.cli", "serve", "--workspace", str(workspace), "--port", str(port)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*cmd, *flags], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.time() + 300
            while True:
                try:
                    urllib.request.urlopen(base + "/system_stats", timeout=2).read()
                    break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        raise RuntimeError("server did not start:\n" + log_path.read_text()) from None
                    time.sleep(0.3)
            yield base
        finally:
            proc.terminate()
            proc.wait(30)


def render_with_serve(
    workspace: Path, log_path: Path, prompt: dict, *flags: str, timeout_s: float = 1200
) -> np.ndarray:
    """The single image of one prompt, rendered by a server started on the workspace with these flags."""
    with serving(workspace, log_path, *flags) as base:
        return render_on_server(base, {"image": prompt}, timeout_s=timeout_s)["image"]


def render_in_both_modes(tmp_path: Path, prompt: dict, timeout_s: float = 1200) -> np.ndarray:
    """The prompt's image from a fresh workspace (tmp_path / "fresh"), served first with the default executors and
    then with `--executors 0`; asserts the two are identical and returns it."""
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log", prompt, timeout_s=timeout_s)
    in_process = render_with_serve(
        workspace, tmp_path / "executors0.log", prompt, "--executors", "0", timeout_s=timeout_s
    )
    assert default.shape == in_process.shape, f"shapes differ between the executor modes: {default.shape}"
    assert np.array_equal(default, in_process), (
        f"{int((default != in_process).sum())} values differ between the executor modes"
    )
    return default


def comfyui_images(recorded: dict) -> list[np.ndarray]:
    """The RGB images a recorder (scripts/record_comfyui_*.py) stored of ComfyUI's run."""
    return [pixels(png) for png in recorded["pngs_rgb"]]


def assert_within_1_of_255_of_record(ours: np.ndarray, png: dict, what: str = "ComfyUI's image") -> None:
    """assert_within_1_of_255 against a recorder's image ({"shape", "u8"}, thinned or whole)."""
    assert_within_1_of_255(at_recorded(ours, png), pixels(png), what)


def assert_within_1_of_255(ours: np.ndarray, theirs: np.ndarray, what: str = "ComfyUI's image") -> None:
    """Every value of ours within 1/255 of theirs (the tolerance for images rendered by ComfyUI)."""
    assert ours.shape == theirs.shape, f"shape {ours.shape}, {what} has {theirs.shape}"
    diff = np.abs(ours.astype(int) - theirs.astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from {what} by more than 1/255"
