"""Flux.1 LoRAs in diffusers' names (ai-toolkit's and diffusers' `transformer.transformer_blocks.N.attn.to_q`,
OneTrainer's `lora_transformer_`, SimpleTuner's `lycoris_`) and BFL's (kohya's `lora_unet_`, `diffusion_model.`, a
single block's `linear1_qkv`) merge as ComfyUI 0.10.0 maps them (comfy/lora.py with comfy.utils.flux_to_diffusers:
q/k/v of either stream onto their rows of the fused qkv, a single block's q/k/v and proj_mlp onto their rows of
linear1): on flux-tiny the same weights change as in ComfyUI, within 1e-6, at strengths 1 and 0.6
(tests/models/fixtures/comfyui_flux_lora.json.xz, scripts/record_comfyui_flux_lora.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from cluster.refs import Patch
from nodes.models import flux_lora
from nodes.models.lora import merge_loras
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_flux_lora.json")
TRANSFORMER = "diffusion_models/flux-tiny.safetensors"


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


@pytest.mark.parametrize("index", range(len(FIXTURE["cases"])))
def test_merged_weights_equal_comfyuis(demo_workspace, tmp_path, index: int) -> None:
    case = FIXTURE["cases"][index]
    sd = load_file(str(demo_workspace.models_dir / TRANSFORMER))
    path = tmp_path / "flux_lora.safetensors"
    save_file({k: tensor(v).contiguous() for k, v in FIXTURE["lora"].items()}, str(path))
    patch = Patch(str(path), f"flux-lora-{index}", case["strength"])
    merged, _ = merge_loras((patch,), flux_lora.lora_targets(sd), sd, flux_lora.convert)
    assert sorted(k for k in sd if not torch.equal(merged[k], sd[k])) == sorted(case["patched"])
    for key, entry in case["patched"].items():
        assert (at_recorded(merged[key], entry) - tensor(entry)).abs().max() <= 1e-6, key
