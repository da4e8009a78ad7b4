"""VAE Decode (Tiled) on LTX-2's video VAE decodes as upstream ComfyUI 0.10.0's VAEDecodeTiled does: tiles in time,
height and width (the node's pixels and frames in latent units), blended with linear feathers, a latent that fits
one tile decoded whole (tests/models/fixtures/comfyui_ltx2_tiled_decode.json.xz, recorded by
scripts/record_comfyui_ltx2_tiled_decode.py with ComfyUI's own node on ltx2-tiny). Before, the frames were tiled as
separate images and the LTX-2 VAE refused the 4-D pieces."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.model_nodes import VAEDecodeTiled
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_ltx2_tiled_decode.json.xz")
ATOL = 1e-5  # measured: 0 (bit-identical on one thread)


@pytest.fixture
def vae(demo_workspace):
    from nodes.loaders import CheckpointLoaderSimple

    path = demo_workspace.models_dir / "checkpoints" / "ltx-2-19b-dev_tiny.safetensors"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["sha256"]
    return CheckpointLoaderSimple().load_checkpoint(path.name)[2]


@pytest.mark.parametrize("index", range(len(FIXTURE["cases"])))
def test_tiled_decode_equals_comfyuis(vae, index):
    torch.set_num_threads(1)
    case = FIXTURE["cases"][index]
    (image,) = asyncio.run(VAEDecodeTiled().decode(vae, {"samples": tensor(case["latent"])}, *case["settings"]))
    torch.testing.assert_close(at_recorded(image, case["image"]), tensor(case["image"]), atol=ATOL, rtol=0)
