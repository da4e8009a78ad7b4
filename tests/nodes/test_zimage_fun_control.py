"""Z-Image-Turbo Fun ControlNet Union through ModelPatchLoader and QwenImageDiffsynthControlnet (issue 38): with the
tiny Fun ControlNet of demo-models on z-image-turbo-tiny (deepened to the released model's two refiner blocks and
eleven main blocks, so three control layers act), the control image is encoded as ComfyUI 0.10.0 encodes it (same
size, scaled, an odd latent padded to whole patches) and the transformer's output with one or two patches equals
ComfyUI's (tests/nodes/fixtures/comfyui_zimage_fun_control.json, scripts/record_comfyui_zimage_fun_control.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_zimage_fun_control.json").read_text())
TRANSFORMER = "diffusion_models/z-image-turbo-tiny.safetensors"
PATCH = "z_image_turbo_fun_controlnet_union_tiny.safetensors"
TOLERANCE = 5e-5


def inputs(latent_hw: list[int], images: list[list[int]]) -> dict:
    """The recorder's inputs (its `inputs`), drawn in the same order."""
    g = torch.Generator().manual_seed(77)
    return {
        "x": torch.randn(2, 16, *latent_hw, generator=g),
        "sigma": torch.tensor([0.9, 0.4]),
        "context": torch.randn(2, 6, 32, generator=g),
        "images": [torch.rand(1, *hw, 3, generator=g) for hw in images],
    }


def deepen(sd: dict[str, torch.Tensor], counts: dict[str, int]) -> dict[str, torch.Tensor]:
    """The recorder's deepening: block i of a stack is the file's block i % (the file's count)."""
    out = {}
    for k, v in sd.items():
        name = k.split(".")[0]
        if name not in counts:
            out[k] = v
            continue
        have = len({key.split(".")[1] for key in sd if key.startswith(name + ".")})
        index, rest = int(k.split(".")[1]), ".".join(k.split(".")[2:])
        for i in range(index, counts[name], have):
            out[f"{name}.{i}.{rest}"] = v
    return out


@pytest.fixture(scope="module")
def deep_model(demo_workspace):
    from safetensors.torch import load_file

    from cluster.refs import ModelRef
    from nodes.models.zimage import load_diffusion_model

    path = demo_workspace.models_dir / TRANSFORMER
    sd = deepen(load_file(path), FIXTURE["deepen"])
    model = load_diffusion_model(
        ModelRef(component="diffusion_model", arch="zimage", sources=(str(path),), digests=("",)), sd
    )
    assert len(model.module.layers) == 11 and len(model.module.noise_refiner) == 2
    return model


def test_demo_files_are_the_recorded_ones(demo_workspace) -> None:
    for name, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("name", sorted(FIXTURE["cases"]))
def test_output_equals_comfyui(demo_workspace, deep_model, fixed_threads, name: str) -> None:
    from nodes.diffsynth import DiffSynthPatch, control_latent
    from nodes.library.model_patch import ModelPatchLoader
    from nodes.loaders import VAELoader
    from nodes.modelfns.diffsynth import with_controls
    from nodes.models.model_patch import load_model_patch

    case = FIXTURE["cases"][name]
    t = inputs(case["latent_hw"], [c["image_hw"] for c in case["controls"]])
    sums = {k: float(v.double().sum()) for k, v in t.items() if k != "images"}
    sums |= {f"image{i}": float(im.double().sum()) for i, im in enumerate(t["images"])}
    assert sums == case["input_sums"]
    (patch,) = ModelPatchLoader().load_model_patch(PATCH)
    (vae,) = VAELoader().load_vae("z-image-turbo-tiny-ae.safetensors")
    net = load_model_patch(patch)
    controls = []
    for image, control, recorded in zip(t["images"], case["controls"], case["encoded"]):
        entry = DiffSynthPatch.of(patch, vae, image, control["strength"], None)
        latent = asyncio.run(control_latent(entry, tuple(case["latent_hw"])))
        torch.testing.assert_close(latent, tensor(recorded), atol=1e-5, rtol=0)
        controls.append((net, latent, control["strength"]))

    def forward(x: torch.Tensor) -> torch.Tensor:
        return deep_model.apply(x, t["sigma"], {"context": t["context"]})

    with torch.no_grad():
        out = (with_controls(forward, deep_model.module, controls) if controls else forward)(t["x"])
        plain = forward(t["x"])
    expected, expected_plain = tensor(case["output"]), tensor(case["plain"])
    # The patch's own effect (up to ~1.5 here) equals ComfyUI's; the unpatched model already differs from ComfyUI's
    # NextDiT by up to 3.4e-5 on this eleven-block model in float32 (a single diffusers Z-Image block by ~2e-5:
    # summation order), so that is the tolerance of both comparisons.
    torch.testing.assert_close(out - plain, expected - expected_plain, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(out, expected, atol=TOLERANCE, rtol=0)
    if controls:  # the patch acts
        assert (expected - expected_plain).abs().max() > 0.1


def test_bad_inputs_are_named(demo_workspace, tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.library.model_patch import ModelPatchLoader, QwenImageDiffsynthControlnet
    from nodes.loaders import UNETLoader, VAELoader

    (patch,) = ModelPatchLoader().load_model_patch(PATCH)
    (vae,) = VAELoader().load_vae("z-image-turbo-tiny-ae.safetensors")
    (qwen,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    with pytest.raises(ValueError, match="model: a Z-Image Fun ControlNet patches Z-Image models, not qwen_image"):
        QwenImageDiffsynthControlnet().diffsynth_controlnet(qwen, patch, vae, torch.rand(1, 64, 64, 3), 1.0)
    # a 2.x file (fifteen control layers) is named, not loaded as the first release
    sd = load_file(demo_workspace.models_dir / "model_patches" / PATCH)
    for k in [k for k in sd if k.startswith("control_layers.5.")]:
        sd[k.replace("control_layers.5.", "control_layers.14.")] = sd[k].clone()
    save_file(sd, demo_workspace.models_dir / "model_patches" / "fun_2x_test.safetensors")
    try:
        with pytest.raises(ValueError, match="Z-Image Fun ControlNet 2.x"):
            ModelPatchLoader().load_model_patch("fun_2x_test.safetensors")
    finally:
        (demo_workspace.models_dir / "model_patches" / "fun_2x_test.safetensors").unlink()
