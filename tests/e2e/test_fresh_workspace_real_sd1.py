"""A fresh workspace holding only a real-layout SD1 checkpoint (CLIP-L with OpenAI's 49,408-token vocabulary)
and no tokenizer file anywhere: the default workflow renders with the default executor and with
`--executors 0`, the same image both ways. The tokenizer comes from the vocabulary shipped with the project.

The checkpoint is the tiny demo SD1 file (ldm layout: model.diffusion_model.*, first_stage_model.*) with its
text encoder replaced by a CLIP-L in the real layout and vocabulary size (cond_stage_model.transformer.
text_model.*, 49,408 x 32 token embeddings, random weights)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REPO, free_port
from tests.e2e.test_samplers_on_executors import render_on_server

CHECKPOINT = "real-layout-sd1.safetensors"


def write_checkpoint(demo_checkpoint: Path, path: Path) -> None:
    from safetensors.torch import load_file, save_file
    from transformers import CLIPTextConfig, CLIPTextModel

    from nodes.models.tokenizer import OPENAI_VOCAB_SIZE

    torch.manual_seed(0)
    clip_l = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=OPENAI_VOCAB_SIZE,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=77,
            hidden_act="quick_gelu",
            bos_token_id=OPENAI_VOCAB_SIZE - 2,
            eos_token_id=OPENAI_VOCAB_SIZE - 1,
            pad_token_id=OPENAI_VOCAB_SIZE - 1,
        )
    )
    tensors = {k: v for k, v in load_file(str(demo_checkpoint)).items() if not k.startswith("cond_stage_model.")}
    # transformers 5 names CLIPTextModel's tensors without the "text_model." level that SD1 files have.
    tensors.update(
        {
            "cond_stage_model.transformer." + ("" if k.startswith("text_model.") else "text_model.") + k: v.to(
                torch.float16
            ).contiguous()
            for k, v in clip_l.state_dict().items()
            if not k.endswith("position_ids")
        }
    )
    assert "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight" in tensors
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, demo_workspace) -> Path:
    root = tmp_path_factory.mktemp("fresh-workspace")
    write_checkpoint(
        demo_workspace.models_dir / "checkpoints" / "sd1-tiny.safetensors", root / "models" / "checkpoints" / CHECKPOINT
    )
    return root


def default_workflow() -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    (loader,) = [n for n in prompt.values() if n["class_type"] == "CheckpointLoaderSimple"]
    loader["inputs"]["ckpt_name"] = CHECKPOINT
    return prompt


def render(workspace: Path, tmp: Path, *flags: str) -> np.ndarray:
    port = free_port()
    env = {**os.environ, "COMFY_CLUSTER_WORKSPACE": str(tmp / "unused-default-workspace")}
    env.pop("COMFY_CLUSTER_CLIP_VOCAB", None)
    log_path = tmp / f"server{''.join(flags)}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "comfy_bridge.cli",
                "serve",
                "--workspace",
                str(workspace),
                "--port",
                str(port),
                "--executor-threads",
                "1",
                *flags,
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/system_stats", timeout=2).read()
                break
            except OSError as err:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("server did not start:\n" + log_path.read_text()) from err
                time.sleep(0.3)
        return render_on_server(base, {"default": default_workflow()}, timeout_s=600)["default"]
    finally:
        proc.terminate()
        proc.wait(30)


def test_default_workflow_renders_from_a_real_sd1_checkpoint_with_no_tokenizer_file(workspace, tmp_path):
    # Nothing but the checkpoint: no vocabulary in the workspace, and no open_clip to borrow one from.
    assert [p.name for p in workspace.rglob("*") if p.is_file()] == [CHECKPOINT]
    assert importlib.util.find_spec("open_clip") is None
    on_executor = render(workspace, tmp_path)
    in_process = render(workspace, tmp_path, "--executors", "0")
    (latent,) = [n["inputs"] for n in default_workflow().values() if n["class_type"] == "EmptyLatentImage"]
    assert on_executor.shape == (latent["height"], latent["width"], 3) and on_executor.std() > 1.0
    # The same image both ways, up to float rounding between the two processes' thread pools (one level).
    assert np.abs(on_executor.astype(int) - in_process.astype(int)).max() <= 1
