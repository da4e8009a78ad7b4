"""`serve --workspace W` executors read W, not the default workspace: a text encoder that needs the
OpenAI-sized CLIP vocabulary finds it in W's models/configs on an executor exactly as in-process.

The workspace is built here: a CLIP-L-layout text encoder with 49,408 token embeddings (random, 32 wide)
and a vocabulary file of that size in OpenAI's merges format (made-up merges; the shape is what counts).
The server processes get an empty default workspace, so an executor that ignored --workspace would fail."""

from __future__ import annotations

import gzip
import json
import shutil
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

WIDE_CLIP = "wide-vocab-clip.safetensors"


def write_vocab(path: Path) -> None:
    """A merges file as OpenAI ships it: a header line, then 48,894 merges (256 * 2 + merges + 2 = 49,408)."""
    from nodes.models.tokenizer import OPENAI_VOCAB_SIZE, bytes_to_unicode

    base = list(bytes_to_unicode().values())
    merges = [f"{a} {b}</w>" for a in base for b in base][: OPENAI_VOCAB_SIZE - 2 * 256 - 2]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(("#version: test\n" + "\n".join(merges) + "\n").encode()))


def write_wide_text_encoder(path: Path) -> None:
    from safetensors.torch import save_file
    from transformers import CLIPTextConfig, CLIPTextModel

    from nodes.models.tokenizer import OPENAI_VOCAB_SIZE

    torch.manual_seed(0)
    model = CLIPTextModel(
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
    tensors = {k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("position_ids")}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, demo_workspace) -> Path:
    root = tmp_path_factory.mktemp("served-workspace")
    (root / "models" / "checkpoints").mkdir(parents=True)
    shutil.copy(demo_workspace.models_dir / "checkpoints" / "sd1-tiny.safetensors", root / "models" / "checkpoints")
    write_wide_text_encoder(root / "models" / "text_encoders" / WIDE_CLIP)
    write_vocab(root / "models" / "configs" / "bpe_simple_vocab_16e6.txt.gz")
    return root


def prompt() -> dict:
    p = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    p["10"] = {"class_type": "CLIPLoader", "inputs": {"clip_name": WIDE_CLIP, "type": "stable_diffusion"}}
    for node in ("6", "7"):
        p[node]["inputs"]["clip"] = ["10", 0]
    p["3"]["inputs"].update(steps=3, sampler_name="euler_ancestral")
    p["5"]["inputs"].update(width=64, height=64)
    return p


def serve(workspace: Path, tmp: Path, executors: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    empty_default = tmp / f"default-workspace-{executors}"
    env = {**__import__("os").environ, "COMFY_CLUSTER_WORKSPACE": str(empty_default)}
    env.pop("COMFY_CLUSTER_CLIP_VOCAB", None)
    log = open(tmp / f"server-{executors}.log", "w")
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
            "--executors",
            str(executors),
            "--executor-threads",
            "1",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(base + "/system_stats", timeout=2).read()
            return proc, base
        except OSError as err:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("server did not start:\n" + (tmp / f"server-{executors}.log").read_text()) from err
            time.sleep(0.3)


def render(workspace: Path, tmp: Path, executors: int) -> np.ndarray:
    proc, base = serve(workspace, tmp, executors)
    try:
        return render_on_server(base, {"wide-vocab": prompt()}, timeout_s=300)["wide-vocab"]
    finally:
        proc.terminate()
        proc.wait(30)


def test_an_executor_reads_the_vocabulary_of_the_served_workspace(workspace, tmp_path):
    on_executor = render(workspace, tmp_path, executors=1)
    in_process = render(workspace, tmp_path, executors=0)
    assert np.array_equal(on_executor, in_process)
    assert not (tmp_path / "default-workspace-1").exists(), "an executor opened the default workspace"
