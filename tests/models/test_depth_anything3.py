"""Depth Anything 3 (issues 38/39: the utility_depth_anything3 image and video templates, the Anima LLLite depth
template's depth pass): the tiny Mono-Large demo file in ComfyUI's key layout loads, and LoadDA3Model, DA3Inference
and every DA3Render mode give what ComfyUI's newest DA3 code gives on the same file
(tests/models/fixtures/comfyui_da3.json.xz, recorded by scripts/record_comfyui_da3.py: ComfyUI's mono model, Lanczos
pre-processing and render helpers run on upstream 0.10.0's comfy package, float16 weights upcast to float32)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.models.depth_anything3 import build_depth_anything3, target_size, unsupported_variant
from nodes.models.depth_anything3_demo import FILE, build_demo_depth_anything3, tiny_da3_state_dict
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_da3.json")
NAME = Path(FILE).name
# Run in the recorder's own venv, ComfyUI's code and ours agree bit for bit (features, head, depth: 0 apart); this
# environment's torch build rounds the 24 blocks differently, depth ~3 lands up to 4.8e-6 apart (sky 2e-7)
ATOL = 1e-5
# the turbo polynomial's slope reaches ~40 per unit: a normalised depth 6e-7 apart comes out up to 2.4e-5 apart
TURBO_ATOL = 5e-5


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("da3"), build_demo_depth_anything3)


def _close(ours: torch.Tensor, entry: dict, what: str, bound: float = ATOL) -> None:
    ours = at_recorded(ours.float(), entry)
    err = (ours - tensor(entry)).abs().max().item()
    assert err <= bound, f"{what}: {err:.3g} from ComfyUI's (bound {bound})"


def test_the_demo_file_is_the_recorded_one(workspace) -> None:
    path = workspace.models_dir / FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["file_sha256"]


@pytest.mark.parametrize("case", range(len(FIXTURE["cases"])))
def test_inference_and_renders_equal_comfyuis(workspace, fixed_threads, case) -> None:
    rec = FIXTURE["cases"][case]
    image = torch.rand(*rec["shape"], generator=torch.Generator().manual_seed(rec["seed"]))

    async def run():
        (model,) = await call_node("LoadDA3Model", model_name=NAME, weight_dtype="default")
        (geometry,) = await call_node("DA3Inference", da3_model=model, image=image, mode="mono", **rec["inputs"])
        renders = {}
        for name, output, norm, clip, colored in FIXTURE["renders"]:
            options = {"output.colored": colored} if norm is None else {}
            if norm is not None:
                options = {"output.normalization": norm, "output.apply_sky_clip": clip}
            (renders[name],) = await call_node("DA3Render", da3_geometry=geometry, output=output, **options)
        return geometry, renders

    geometry, renders = asyncio.run(run())
    assert set(geometry) == {"depth", "sky", "image", "mode"} and geometry["mode"] == "mono"
    assert 0 < float((geometry["sky"] >= 0.3).float().mean()) < 0.5  # some sky, some ground: the clip is exercised
    for field, entry in rec["geometry"].items():
        _close(geometry[field], entry, field)
    for name, entry in rec["renders"].items():
        assert renders[name].shape == (*rec["shape"][:3], 3)
        coloured = "colored" in name  # depth_colored_* and sky_mask_colored go through turbo
        _close(renders[name], entry, f"render {name}", TURBO_ATOL if coloured else ATOL)


def test_target_size_rounds_each_side_to_the_patch() -> None:
    assert target_size(40, 56, 140, "upper_bound_resize") == (98, 140)
    assert target_size(64, 64, 504, "lower_bound_resize") == (504, 504)
    assert target_size(30, 90, 280, "lower_bound_resize") == (280, 840)  # 280 / 30 * 90 = 840
    assert target_size(100, 35, 140, "upper_bound_resize") == (140, 56)  # 49 rounds up to 56 (ties go up)


def test_multiview_variants_and_mode_are_refused(workspace) -> None:
    sd = tiny_da3_state_dict()
    assert unsupported_variant(sd) is None
    dual = {**sd, "head.norm.weight": torch.ones(64)}
    with pytest.raises(NotImplementedError, match="Small/Base"):
        build_depth_anything3(dual)

    async def multiview():
        (model,) = await call_node("LoadDA3Model", model_name=NAME, weight_dtype="default")
        image = torch.rand(1, 28, 28, 3)
        await call_node(
            "DA3Inference",
            da3_model=model,
            image=image,
            resolution=140,
            resize_method="upper_bound_resize",
            mode="multiview",
            **{"mode.ref_view_strategy": "first", "mode.pose_method": "cam_dec"},
        )

    with pytest.raises(ValueError, match="multiview"):
        asyncio.run(multiview())
