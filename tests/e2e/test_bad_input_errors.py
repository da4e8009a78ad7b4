"""Bad input gives one clear error naming the node and the input, and the process goes on working."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _workflow(name: str) -> dict:
    return json.loads((REPO / "workflows_json" / name).read_text())


def _run(ws, prompt: dict) -> str:
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    with pytest.raises(SystemExit) as info:
        asyncio.run(run_prompt(prompt, None, build_registry(ws), show_progress=False))
    return str(info.value)


@pytest.fixture
def truncated_checkpoint(demo_workspace):
    src = demo_workspace.full_path("checkpoints", "sd1-tiny.safetensors")
    bad = src.parent / "truncated-test.safetensors"
    data = src.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    yield bad.name
    bad.unlink()


def test_truncated_checkpoint_fails_validation_naming_loader_and_input(demo_workspace, truncated_checkpoint):
    prompt = _workflow("text_to_image.json")
    prompt["4"]["inputs"]["ckpt_name"] = truncated_checkpoint
    message = _run(demo_workspace, prompt)
    assert "custom_validation_failed" in message and '"4"' in message and "CheckpointLoaderSimple" in message
    assert "ckpt_name - truncated-test.safetensors: file is truncated" in message


def test_lora_for_another_architecture_names_the_lora(demo_workspace):
    prompt = _workflow("lora.json")
    prompt["4"]["inputs"]["ckpt_name"] = "sdxl-tiny.safetensors"  # the demo LoRA is for SD1
    message = _run(demo_workspace, prompt)
    assert "sd1-tiny-lora.safetensors" in message and "another architecture" in message
    assert "clip:" in message or "model:" in message


def test_controlnet_hint_batch_mismatch_names_input(demo_workspace):
    prompt = _workflow("controlnet.json")
    prompt["11"] = {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 3, "color": 0}}
    prompt["5"]["inputs"]["batch_size"] = 2
    message = _run(demo_workspace, prompt)
    assert "node 3 (KSampler)" in message and "positive:" in message and "batch of 3" in message


def test_tiny_controlnet_hint_names_input(demo_workspace):
    prompt = _workflow("controlnet.json")
    prompt["11"] = {"class_type": "EmptyImage", "inputs": {"width": 4, "height": 4, "batch_size": 1, "color": 0}}
    message = _run(demo_workspace, prompt)
    assert "node 12 (ControlNetApplyAdvanced)" in message and "image:" in message


def test_out_of_range_widget_fails_validation_naming_input(demo_workspace):
    prompt = _workflow("text_to_image.json")
    prompt["3"]["inputs"]["steps"] = 0
    message = _run(demo_workspace, prompt)
    assert "value_smaller_than_min" in message and '"3"' in message and "steps" in message


def test_process_keeps_working_after_errors(demo_workspace, truncated_checkpoint):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    bad = _workflow("text_to_image.json")
    bad["4"]["inputs"]["ckpt_name"] = truncated_checkpoint
    _run(demo_workspace, bad)
    files = asyncio.run(
        run_prompt(_workflow("text_to_image.json"), None, build_registry(demo_workspace), show_progress=False)
    )
    assert files and files[0].exists()
