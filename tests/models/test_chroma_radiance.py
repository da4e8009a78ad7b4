"""Chroma Radiance (nodes/models/chroma_radiance.py): detection from the published layout and the pixel-space model
(Chroma's transformer on 16x16 pixel patches, the NeRF head), equal to ComfyUI 0.3.64 on the tiny demo file within
1e-5 (tests/models/fixtures/comfyui_chroma_radiance.json, recorded by scripts/record_comfyui_chroma_radiance.py),
whatever ComfyUI's NeRF tile size (it only bounds memory)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.models.test_chroma import ref, tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_chroma_radiance.json").read_text())
DIT = "diffusion_models/chroma_radiance_tiny.safetensors"
# the recording script's cases: (seed, pixel shape, context rows, timestep(s), guidance, ComfyUI's NeRF tile size)
CASES = {
    "one": (1, [1, 3, 32, 48], 5, [0.7], 0.0, -1),
    "odd_size": (2, [1, 3, 40, 23], 3, [0.3], 0.0, -1),
    "batch_two": (3, [2, 3, 32, 32], 4, [0.9, 0.2], 0.0, -1),
    "guidance_untiled": (4, [1, 3, 48, 32], 6, [0.5], 4.0, 0),
    "tiled_by_two": (5, [1, 3, 48, 48], 4, [0.4], 0.0, 2),
}


def test_fixture_was_recorded_on_these_files(demo_workspace) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def test_detection_follows_comfyuis_keys(demo_workspace) -> None:
    from nodes.models.detect import probe

    info = probe(demo_workspace.models_dir / DIT)
    assert (info.arch, info.kind) == ("chroma_radiance", "diffusion_model")
    assert probe(demo_workspace.models_dir / "diffusion_models/chroma_tiny.safetensors").arch == "chroma"


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_equals_comfyuis(demo_workspace, case: str) -> None:
    from nodes.models.loader import load_diffusion_model

    torch.set_num_threads(1)
    model = load_diffusion_model(ref(demo_workspace, "diffusion_model", DIT, "chroma_radiance"))
    seed, shape, rows, t, guidance, _ = CASES[case]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    context = torch.randn(1, rows, model.config["transformer"]["joint_attention_dim"], generator=g)
    cond = {"context": context.expand(shape[0], -1, -1)}
    if guidance:
        cond["guidance"] = guidance
    with torch.no_grad():
        out = model.apply(x, torch.tensor(t), cond)
    expected = tensor(FIXTURE["cases"][case]["out"])
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_a_file_with_other_patches_is_refused_by_name(demo_workspace) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import load_diffusion_model

    broken = demo_workspace.models_dir / "diffusion_models" / "chroma_radiance_patch8_test.safetensors"
    sd = load_file(str(demo_workspace.models_dir / DIT))
    sd["img_in_patch.weight"] = sd["img_in_patch.weight"][:, :, :8, :8].contiguous()
    save_file(sd, str(broken))
    try:
        with pytest.raises(ModelLoadError, match="patches are 16x16"):
            load_diffusion_model(
                ref(demo_workspace, "diffusion_model", broken.relative_to(demo_workspace.models_dir), "chroma_radiance")
            )
    finally:
        broken.unlink()
