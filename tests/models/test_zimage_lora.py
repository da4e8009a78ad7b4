"""LoRAs on Z-Image (LoraLoaderModelOnly): the three layouts Z-Image LoRAs are published in (ai-toolkit's diffusers
names with q/k/v apart, ComfyUI's own names on the fused qkv, diffusers' `transformer.` / SimpleTuner's `lycoris_`
with alphas) merge as ComfyUI 0.10.0 merges them: every patched weight within 1e-6 and the NextDiT's output within
TOLERANCE of ComfyUI's, alone and chained (tests/models/fixtures/comfyui_zimage_lora.json.xz, recorded by
scripts/record_comfyui_zimage_lora.py on the demo files)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_zimage_lora.json")
TRANSFORMER = "diffusion_models/z-image-turbo-tiny.safetensors"
# diffusers' ZImageTransformer2DModel and ComfyUI's NextDiT sum in other orders: unpatched, their outputs here differ by
# 1.1e-5 at most (values up to 2), as in tests/nodes/test_zimage_fun_control.py
TOLERANCE = 5e-5


def lora_file(layout: str) -> str:
    from nodes.models.zimage_demo import LORA_FILES

    return Path(LORA_FILES[layout]).name


def patched_model(chain: list):
    from nodes.loaders import LoraLoaderModelOnly, UNETLoader

    (model,) = UNETLoader().load_unet(Path(TRANSFORMER).name, "default")
    for layout, strength in chain:
        (model,) = LoraLoaderModelOnly().load_lora_model_only(model, lora_file(layout), strength)
    return model


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_patched_weights_equal_comfyuis(demo_workspace, case: str) -> None:
    """Every weight ComfyUI patched, merged here in ComfyUI's names (q/k/v rows of the fused qkv included), within
    1e-6; no other weight changes."""
    from nodes.models.lora import merge_loras
    from nodes.models.zimage import lora_targets

    rec = FIXTURE["cases"][case]
    sd = load_file(str(demo_workspace.models_dir / TRANSFORMER))
    merged, count = merge_loras(patched_model(rec["chain"]).patches, lora_targets(sd), sd)
    changed = {k for k in sd if not torch.equal(merged[k], sd[k])}
    assert changed == set(rec["patched"])
    for key, entry in rec["patched"].items():
        expected = tensor(entry)
        assert (at_recorded(merged[key], entry) - expected).abs().max() <= 1e-6, key
    assert count >= len(changed)


def forward(model) -> torch.Tensor:
    from nodes.models.loader import load_diffusion_model

    net = load_diffusion_model(model)
    sigma, context = torch.tensor([FIXTURE["inputs"]["sigma"]]), tensor(FIXTURE["context"])
    with torch.no_grad():  # apply gives ComfyUI's view of the model: its NextDiT's (negated) output
        return net.apply(tensor(FIXTURE["x"]), sigma, {"context": context})


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_output_equals_comfyuis(demo_workspace, case: str) -> None:
    """UNETLoader + LoraLoaderModelOnly, loaded: the NextDiT's output at the recorded latent, context and sigma, and
    the LoRA's change to it, within TOLERANCE of ComfyUI's patched model's; the change is not small."""
    torch.set_num_threads(1)
    rec = FIXTURE["cases"][case]
    out, plain = forward(patched_model(rec["chain"])), forward(patched_model([]))
    expected, expected_plain = tensor(rec["output"]), tensor(FIXTURE["plain"])
    assert (expected - expected_plain).abs().max() > 1e-2
    torch.testing.assert_close(out - plain, expected - expected_plain, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(out, expected, atol=TOLERANCE, rtol=0)


def test_a_lora_for_another_model_is_refused_by_name(demo_workspace) -> None:
    from nodes.loaders import LoraLoaderModelOnly, UNETLoader
    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_diffusion_model

    name = "z_image_lora_test_other.safetensors"
    path = demo_workspace.models_dir / "loras" / name
    save_file(
        {
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight": torch.zeros(4, 256),
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_B.weight": torch.zeros(768, 4),
        },
        str(path),
    )
    try:
        (model,) = UNETLoader().load_unet(Path(TRANSFORMER).name, "default")
        (model,) = LoraLoaderModelOnly().load_lora_model_only(model, name, 1.0)
        with pytest.raises(ModelLoadError, match="double_blocks.0.img_attn.qkv"):
            load_diffusion_model(model)
    finally:
        path.unlink()
