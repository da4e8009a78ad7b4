"""`bench coldstart`'s floor runs the same steps as the server: ComfyUI's normal schedule for SD1, and a
whole render of a checkpoint in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from comfy_bridge.bench.coldstart_floor import normal_sigmas, timestep
from nodes.models.loader import CONFIGS, sampling_config
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.schedules import normal


def test_the_floor_samples_on_the_ksamplers_normal_schedule():
    ms = model_sampling_from_config(sampling_config(CONFIGS / "sd1" / "scheduler" / "scheduler_config.json", None))
    for steps in (2, 5, 20):
        sigmas, log_sigmas = normal_sigmas(steps)
        assert torch.allclose(sigmas, normal(ms, steps), rtol=1e-5)
        assert torch.equal(timestep(sigmas[:-1], log_sigmas), ms.timestep(sigmas[:-1]))


def test_the_floor_renders_a_checkpoint_in_a_fresh_process(sd_models, tmp_path):
    out = tmp_path / "floor.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "comfy_bridge.bench.coldstart_floor",
            str(sd_models / "checkpoints" / "sd1-tiny.safetensors"),
            "--size",
            "64",
            "--steps",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    phases = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(phases) == ["imports", "loaded", "encoded", "sampled", "image", "image_at", "imported"]
    assert out.read_bytes().startswith(b"\x89PNG")


def test_the_floor_has_the_servers_import_economies_and_the_plain_script_not(sd_models, tmp_path):
    """The floor imports what an executor imports (nodes.models' deferred modules stay unrun through the whole
    render); `--plain` imports diffusers whole, as a script written without them (issue 40 item 5)."""
    imported = {}
    for plain in (False, True):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "comfy_bridge.bench.coldstart_floor",
                str(sd_models / "checkpoints" / "sd1-tiny.safetensors"),
                "--size",
                "64",
                "--steps",
                "1",
                *(["--plain"] * plain),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        imported[plain] = json.loads(done.stdout.strip().splitlines()[-1])["imported"]
    assert imported[False] == []
    assert "torch._dynamo" in imported[True] and "diffusers.models.transformers" in imported[True]


def test_the_floor_spins_libgomp_as_serve_does():
    from comfy_bridge.bench import coldstart_floor
    from comfy_bridge.cli.serve import GOMP_SPINCOUNT

    assert coldstart_floor.GOMP_SPINCOUNT == GOMP_SPINCOUNT
