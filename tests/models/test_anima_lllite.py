"""Anima LLLite (nodes/models/anima_lllite.py, AnimaLLLiteApply): the patched Anima DiT equal to the newest ComfyUI's
LLLite code (comfy/ldm/anima/lllite.py run on upstream 0.10.0 with the newest patch points) on the tiny files
within 1e-5 (tests/models/fixtures/comfyui_anima_lllite.json.xz, recorded by scripts/record_comfyui_anima_lllite.py),
for an RGB control and the inpainting layout (mask, masked input, no mask), odd sizes, a batch, a sigma window."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_anima_lllite.json.xz")
DIT = "diffusion_models/anima_tiny.safetensors"
ANY = "model_patches/anima_lllite_any_tiny.safetensors"
INPAINT = "model_patches/anima_lllite_inpainting_tiny.safetensors"
# the recorder's cases: (file, seed, latent shape, image [B,H,W], mask?, strength, start %, end %, sigma)
CASES = {
    "any": (ANY, 1, [1, 16, 1, 8, 6], [1, 40, 56], False, 0.8, 0.0, 1.0, 0.6),
    "any_batch_two_odd": (ANY, 2, [2, 16, 1, 5, 7], [1, 48, 48], False, 1.0, 0.0, 1.0, 0.9),
    "any_outside_window": (ANY, 3, [1, 16, 1, 6, 6], [1, 48, 48], False, 1.0, 0.5, 1.0, 0.9),
    "inpaint": (INPAINT, 4, [1, 16, 1, 6, 8], [1, 50, 60], True, 1.0, 0.0, 1.0, 0.5),
    "inpaint_no_mask": (INPAINT, 5, [1, 16, 1, 6, 6], [1, 48, 48], False, -0.7, 0.0, 0.7, 0.8),
}


def inputs(seed: int, shape: list[int], image: list[int], masked: bool, width: int):
    """The recording script's draws, in its order."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    states = torch.randn(1, 5, width, generator=g)
    t5 = torch.randint(0, 32128, (4,), generator=g)
    pixels = torch.rand(*image, 3, generator=g)
    mask = (torch.rand(*image, generator=g) > 0.6).float() if masked else None
    return x, states, t5, pixels, mask


def test_object_info_has_todays_interface() -> None:
    """AnimaLLLiteApply as today's ComfyUI declares it (comfy_extras/nodes_model_patch.py at 08f68f09)."""
    import json

    from comfy_bridge.registry import build_registry

    info = json.loads(json.dumps(build_registry(None, load_custom_nodes=False).node_info("AnimaLLLiteApply")))
    percent = {"min": 0.0, "max": 1.0, "step": 0.001}
    assert info["input"] == {
        "required": {
            "model": ["MODEL"],
            "model_patch": ["MODEL_PATCH"],
            "image": ["IMAGE"],
            "strength": ["FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}],
            "start_percent": ["FLOAT", {"default": 0.0, **percent}],
            "end_percent": ["FLOAT", {"default": 1.0, **percent}],
        },
        "optional": {"mask": ["MASK"]},
    }
    assert info["input_order"]["required"] == [
        "model",
        "model_patch",
        "image",
        "strength",
        "start_percent",
        "end_percent",
    ]
    assert (info["output"], info["display_name"], info["category"], info["experimental"]) == (
        ["MODEL"],
        "Apply Anima LLLite",
        "model/patch/anima",
        True,
    )
    assert info["python_module"] == "comfy_extras.nodes_model_patch"


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_loader_reads_the_published_layout(demo_workspace, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.library.model_patch import ModelPatchLoader

    (ref,) = ModelPatchLoader().load_model_patch("anima_lllite_any_tiny.safetensors")
    assert (ref.arch, ref.option("in_channels"), ref.option("masked_input")) == ("anima_lllite", 3, False)
    (ref,) = ModelPatchLoader().load_model_patch("anima_lllite_inpainting_tiny.safetensors")
    assert (ref.arch, ref.option("in_channels"), ref.option("masked_input")) == ("anima_lllite", 4, True)
    sd = load_file(str(demo_workspace.models_dir / ANY))
    save_file(
        sd, str(demo_workspace.models_dir / "model_patches" / "lllite_v3_test.safetensors"), {"lllite.version": "3"}
    )
    try:
        with pytest.raises(ValueError, match="version '3'"):
            ModelPatchLoader().load_model_patch("lllite_v3_test.safetensors")
    finally:
        (demo_workspace.models_dir / "model_patches" / "lllite_v3_test.safetensors").unlink()


def _run(demo_workspace, case: str, rows: slice | None = None):
    from nodes.diffsynth import lllite_input
    from nodes.library.model_patch import AnimaLLLiteApply, ModelPatchLoader
    from nodes.loaders import make_ref
    from nodes.models import anima_lllite
    from nodes.models.loader import load_diffusion_model
    from nodes.models.model_patch import load_model_patch

    name, seed, shape, image, masked, strength, start, end, sigma = CASES[case]
    model_ref = make_ref("diffusion_model", "anima", [demo_workspace.models_dir / DIT])
    model = load_diffusion_model(model_ref)
    x, states, t5, pixels, mask = inputs(seed, shape, image, masked, model.config["adapter"]["source_dim"])
    (patch,) = ModelPatchLoader().load_model_patch(Path(name).name)
    (patched_ref,) = AnimaLLLiteApply().apply_patch(model_ref, patch, pixels, strength, start, end, mask)
    (entry,) = patched_ref.option("diffsynth")
    assert entry.sigma_start == pytest.approx(FIXTURE["percent_to_sigma"][str(start)], abs=1e-7)
    assert entry.sigma_end == pytest.approx(FIXTURE["percent_to_sigma"][str(end)], abs=1e-7)
    control = anima_lllite.StepControl(
        load_model_patch(patch), lllite_input(entry, tuple(shape[-2:])), strength, entry.sigma_start, entry.sigma_end
    )
    if rows is not None:
        x = x[rows]
    t = torch.tensor([sigma] * x.shape[0])
    cond = {"context": states, "t5xxl_ids": t5[None]}
    with torch.no_grad():
        plain = model.apply(x, t, cond)
        patched = anima_lllite.with_controls(lambda z: model.apply(z, t, cond), model.module.dit, [control], sigma)(x)
    return plain, patched


@pytest.mark.parametrize("case", sorted(CASES))
def test_patched_dit_equals_comfyuis(demo_workspace, case: str) -> None:
    torch.set_num_threads(1)
    plain, patched = _run(demo_workspace, case)
    want = FIXTURE["cases"][case]
    torch.testing.assert_close(plain, tensor(want["plain"]), atol=1e-5, rtol=0)
    torch.testing.assert_close(patched, tensor(want["patched"]), atol=1e-5, rtol=0)
    if case == "any_outside_window":
        assert torch.equal(plain, patched)
    else:
        assert (patched - plain).abs().max() > 0.1


def test_patched_rows_do_not_depend_on_the_batch(demo_workspace) -> None:
    torch.set_num_threads(1)
    _, batched = _run(demo_workspace, "any_batch_two_odd")
    _, alone = _run(demo_workspace, "any_batch_two_odd", slice(1, 2))
    assert torch.equal(batched[1:2], alone)


def test_bad_inputs_are_refused_by_name(demo_workspace) -> None:
    from nodes.library.model_patch import AnimaLLLiteApply, ModelPatchLoader
    from nodes.loaders import make_ref

    (patch,) = ModelPatchLoader().load_model_patch("anima_lllite_any_tiny.safetensors")
    flux = make_ref("diffusion_model", "flux", [demo_workspace.models_dir / DIT])
    with pytest.raises(ValueError, match="model: an Anima LLLite patches Anima models"):
        AnimaLLLiteApply().apply_patch(flux, patch, torch.zeros(1, 8, 8, 3), 1.0, 0.0, 1.0)
    anima = make_ref("diffusion_model", "anima", [demo_workspace.models_dir / DIT])
    with pytest.raises(ValueError, match="image:"):
        AnimaLLLiteApply().apply_patch(anima, patch, torch.zeros(8, 8), 1.0, 0.0, 1.0)
