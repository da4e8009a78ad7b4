"""Frame interpolation (issue 39: the utility_video_frame_interpolation template; nodes/models/frame_interpolation.py,
FILM and RIFE 4.2x): FrameInterpolationModelLoader and FrameInterpolate give what the newest ComfyUI's nodes give on
the same demo-models files (scripts/record_comfyui_frame_interpolation.py,
tests/models/fixtures/comfyui_frame_interpolation.json.xz: FILM 6e-7 apart, RIFE bit for bit), and declare its
interface (comfy_extras/nodes_frame_interpolation.py, newest source)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.models import frame_interpolation as fi
from nodes.models.frame_interpolation_demo import build_demo_frame_interpolation
from nodes.models.safetensors_io import load_state_dict
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_frame_interpolation.json.xz"


def frames(seed: int, count: int, height: int, width: int) -> torch.Tensor:
    """The recorder's seeded frames (scripts/record_comfyui_frame_interpolation.frames)."""
    gen = torch.Generator().manual_seed(seed)
    picture = torch.rand(height, width + 4 * count, 3, generator=gen)
    shifted = torch.stack([picture[:, 3 * i : 3 * i + width] for i in range(count)])
    return (shifted * 0.9 + 0.1 * torch.rand(shifted.shape, generator=gen)).contiguous()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    for ws in active_workspace(tmp_path_factory.mktemp("finterp"), build_demo_frame_interpolation):
        yield ws.models_dir / "frame_interpolation"


@pytest.mark.parametrize("name", ["film", "rife"])
def test_nodes_match_comfyui(models: Path, name: str) -> None:
    recorded = load_json(FIXTURE)
    case = recorded["cases"][name]
    path = models / case["file"]
    # the demo file is the one ComfyUI was run on
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded["files"][case["file"]]
    assert fi.kind_of(load_state_dict(path)) == name

    async def run():
        (model,) = await call_node("FrameInterpolationModelLoader", model_name=case["file"])
        assert model.arch == name
        images = frames(case["seed"], *case["shape"])
        return (await call_node("FrameInterpolate", interp_model=model, images=images, multiplier=case["multiplier"]))[
            0
        ]

    ours = asyncio.run(run())
    theirs = tensor(case["images"])
    diff = (at_recorded(ours, case["images"]) - theirs).abs().max().item()
    assert diff < 1e-5, diff
    assert 0.05 < theirs.std() and theirs.min() >= 0 and theirs.max() <= 1  # not a degenerate recording


def test_given_frames_kept_and_short_inputs_untouched(models: Path) -> None:
    model = fi.build(load_state_dict(models / "rife_v4.26_tiny.safetensors"))
    images = frames(3, 3, 40, 48) * 1.2 - 0.1  # outside 0..1: the copies are clamped like the new frames
    out = fi.interpolate(model, images, 3)
    assert out.shape == (7, 40, 48, 3)
    assert torch.equal(out[::3], images.clamp(0, 1))
    one = images[:1]
    assert fi.interpolate(model, one, 4) is one  # as ComfyUI: returned as given, not clamped


def test_rife_names_of_every_published_layout() -> None:
    from nodes.models.frame_interp_rife import normalize_keys

    t = torch.zeros(1)
    raw = {"module.block3.conv0.1.0.weight": t, "flownet.encode.cnn3.weight": t, "module.teacher.x": t, "caltime.y": t}
    assert normalize_keys(raw) == {"blocks.3.conv0.1.0.weight": t, "encode.cnn3.weight": t}
    assert fi.kind_of({"x.weight": t}) is None


def test_declares_comfyuis_interface() -> None:
    import nodes

    loader = nodes.NODE_CLASS_MAPPINGS["FrameInterpolationModelLoader"]
    run = nodes.NODE_CLASS_MAPPINGS["FrameInterpolate"]
    assert loader.RETURN_TYPES == ("INTERP_MODEL",) and loader.CATEGORY == "model/loaders"
    inputs = loader.INPUT_TYPES()
    assert list(inputs["required"]) == ["model_name"] and list(inputs["optional"]) == ["device"]
    assert inputs["optional"]["device"][1]["default"] == "default" and inputs["optional"]["device"][1]["advanced"]
    assert run.RETURN_TYPES == ("IMAGE",) and run.CATEGORY == "video"
    required = run.INPUT_TYPES()["required"]
    assert list(required) == ["interp_model", "images", "multiplier"] and required["interp_model"][0] == "INTERP_MODEL"
    assert {k: required["multiplier"][1][k] for k in ("default", "min", "max")} == {"default": 2, "min": 2, "max": 16}
