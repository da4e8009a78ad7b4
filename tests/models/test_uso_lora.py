"""USO's DiT LoRA on FLUX.1 (LoraLoaderModelOnly, the flux1_dev_uso_reference_image_gen template's): the released
file's processor names (`double_blocks.N.processor.qkv_lora1.down.weight`, ...) are renamed as ComfyUI's
lora_convert renames them and merged in ComfyUI's Flux names (a single block's qkv_lora on the attention rows of its
fused linear1, its proj_lora on the whole linear2): on the tiny files of nodes/models/uso_demo.py (flux-tiny's width at
the released depth, which ComfyUI's test for a USO LoRA reads) the same 152 weights change as in ComfyUI 0.10.0, the
recorded ones within 1e-6, and the Flux model's output equals ComfyUI's patched model's
(tests/models/fixtures/comfyui_uso_lora.json.xz, scripts/record_comfyui_uso_lora.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_uso_lora.json")
CHECKPOINT = "flux1-dev-uso-tiny.safetensors"
LORA = "uso-flux1-dit-lora-v1-tiny.safetensors"
CASES = {case["strength"]: case for case in FIXTURE["cases"]}


def model_with_lora(strength: float | None):
    from nodes.loaders import CheckpointLoaderSimple, LoraLoaderModelOnly

    model, _, _ = CheckpointLoaderSimple().load_checkpoint(CHECKPOINT)
    if strength is not None:
        (model,) = LoraLoaderModelOnly().load_lora_model_only(model, LORA, strength)
    return model


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


@pytest.mark.parametrize("strength", sorted(CASES))
def test_patched_weights_equal_comfyuis(demo_workspace, strength: float) -> None:
    from nodes.models.flux import with_loras
    from nodes.models.safetensors_io import load_state_dict

    case = CASES[strength]
    model = model_with_lora(strength)
    sd = load_state_dict(model.sources[0], model.digests[0])
    original = {k[len("model.diffusion_model.") :]: v for k, v in sd.items() if k.startswith("model.diffusion_model.")}
    merged = with_loras(model, sd, model.sources[0])
    assert sorted(k for k in original if not torch.equal(merged[k], original[k])) == case["changed_keys"]
    assert len(case["changed_keys"]) == 19 * 4 + 38 * 2
    for key, entry in case["patched"].items():
        assert (at_recorded(merged[key], entry) - tensor(entry)).abs().max() <= 1e-6, key


@pytest.mark.parametrize("strength", [None, *sorted(CASES)])
def test_output_equals_comfyuis(demo_workspace, strength: float | None) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    net = load_diffusion_model(model_with_lora(strength))
    cond = {"context": tensor(FIXTURE["context"]), "pooled": tensor(FIXTURE["y"]), "guidance": FIXTURE["guidance"]}
    with torch.no_grad():
        out = net.apply(tensor(FIXTURE["x"]), torch.tensor([FIXTURE["sigma"]]), cond)
    expected = tensor(FIXTURE["plain"] if strength is None else CASES[strength]["output"])
    if strength is not None:
        assert (expected - tensor(FIXTURE["plain"])).abs().max() > 1e-2
    assert (out - expected).abs().max() <= 1e-5, (out - expected).abs().max()


def test_flux_loras_of_unknown_names_are_refused(demo_workspace) -> None:
    from safetensors.torch import save_file

    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_diffusion_model

    name = "flux_lora_test_norm_out.safetensors"
    path = demo_workspace.models_dir / "loras" / name
    save_file(
        {
            # ComfyUI swaps this layer's scale and shift halves: not merged here
            "transformer.norm_out.linear.lora_A.weight": torch.zeros(4, 32),
            "transformer.norm_out.linear.lora_B.weight": torch.zeros(64, 4),
        },
        str(path),
    )
    try:
        from nodes.loaders import LoraLoaderModelOnly

        (model,) = LoraLoaderModelOnly().load_lora_model_only(model_with_lora(None), name, 1.0)
        with pytest.raises(ModelLoadError, match="norm_out.linear"):
            load_diffusion_model(model)
    finally:
        path.unlink()
