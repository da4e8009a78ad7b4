"""MoGe-2 (issues 38/39: utility_moge_depth_estimation and video_ltx2_3_ic_lora's depth pass): the tiny demo file
in MoGe's key layout loads, and LoadMoGeModel, MoGeInference and every MoGeRender mode give what ComfyUI's newest
MoGe code gives on the same file (tests/models/fixtures/comfyui_moge.json.xz, recorded by
scripts/record_comfyui_moge.py: ComfyUI's model, focal/shift recovery and render helpers run on upstream 0.10.0's
comfy package, float16 weights cast to float32 as on a CPU)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.models.moge import build_moge, moge_version
from nodes.models.moge_demo import FILE, build_demo_moge, tiny_moge2_state_dict
from tests.float_tolerance import ulps_of_largest
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_moge.json")
NAME = Path(FILE).name
ATOL = 1e-5
# Here every value equals the recording (0 apart). The focal and shift fit (Levenberg-Marquardt to ftol 1e-3), the
# disparity percentiles and the turbo polynomial amplify a rounding upstream about a hundredfold: with ComfyUI's
# CPU attention kernel (einsum) instead of PyTorch's, encoder outputs 3e-7 apart gave points 1.2e-5 and coloured
# depth 2.9e-5 apart. So on other CPUs the bound is ATOL or 256 float32 ulps of the largest value, where more.
ULPS = 256


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("moge"), build_demo_moge)


def _close(ours: torch.Tensor, entry: dict, what: str) -> None:
    ours = at_recorded(ours.float(), entry)
    theirs = tensor(entry)
    finite = torch.isfinite(theirs)
    assert torch.equal(finite, torch.isfinite(ours)), f"{what}: the masked (infinite) pixels differ"
    bound = max(ATOL, ulps_of_largest(theirs[finite].numpy(), ULPS))
    err = (ours[finite] - theirs[finite]).abs().max().item() if finite.any() else 0.0
    assert err <= bound, f"{what}: {err:.3g} from ComfyUI's (bound {bound:.3g})"


def test_the_demo_file_is_the_recorded_one(workspace) -> None:
    path = workspace.models_dir / FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["file_sha256"]


@pytest.mark.parametrize("case", range(len(FIXTURE["cases"])))
def test_inference_and_renders_equal_comfyuis(workspace, fixed_threads, case) -> None:
    rec = FIXTURE["cases"][case]
    image = torch.rand(*rec["shape"], generator=torch.Generator().manual_seed(rec["seed"]))

    async def run():
        (model,) = await call_node("LoadMoGeModel", model_name=NAME)
        (geometry,) = await call_node("MoGeInference", moge_model=model, image=image, **rec["inputs"])
        renders = {m: (await call_node("MoGeRender", moge_geometry=geometry, output=m))[0] for m in rec["renders"]}
        return geometry, renders

    geometry, renders = asyncio.run(run())
    assert set(geometry) == {"image", *rec["geometry"]}
    assert geometry["mask"].dtype == torch.bool and 0 < geometry["mask"].float().mean() < 1
    for field, entry in rec["geometry"].items():
        _close(geometry[field], entry, field)
    for mode, entry in rec["renders"].items():
        assert renders[mode].shape == (*rec["shape"][:3], 3)
        _close(renders[mode], entry, f"render {mode}")


def test_comfyuis_renamed_layout_loads_to_the_same_model() -> None:
    """ComfyUI's own DINOv2 names (q, k, v split), as its loader renames MoGe's, read back to the same weights."""
    sd = tiny_moge2_state_dict()
    renamed = {}
    for key, value in sd.items():
        if ".attn.qkv." in key:
            index, tail = key.split(".blocks.")[1].split(".")[0], key.rsplit(".", 1)[1]
            for name, part in zip(("query", "key", "value"), value.chunk(3)):
                renamed[f"encoder.backbone.encoder.layer.{index}.attention.attention.{name}.{tail}"] = part
        elif ".blocks." in key:
            index, sub = key.split(".blocks.")[1].split(".", 1)
            sub = sub.replace("ls1.gamma", "layer_scale1.lambda1").replace("ls2.gamma", "layer_scale2.lambda1")
            renamed[
                f"encoder.backbone.encoder.layer.{index}.{sub.replace('attn.proj.', 'attention.output.dense.')}"
            ] = value
        else:
            for old, new in (
                ("patch_embed.proj.", "embeddings.patch_embeddings.projection."),
                ("cls_token", "embeddings.cls_token"),
                ("pos_embed", "embeddings.position_embeddings"),
                ("mask_token", "embeddings.mask_token"),
                ("backbone.norm.", "backbone.layernorm."),
            ):
                key = key.replace(old, new) if key.startswith("encoder.backbone.") else key
            renamed[key] = value
    ours, theirs = build_moge(sd).state_dict(), build_moge(renamed).state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_moge_1_and_3_are_refused_by_name(workspace) -> None:
    sd = tiny_moge2_state_dict()
    assert moge_version({**sd, "refiner.encoder_fuse.weight": torch.zeros(1)}) == "moge3"
    assert moge_version({"backbone.cls_token": torch.zeros(1), "head.x": torch.zeros(1)}) == "moge1"
    with pytest.raises(NotImplementedError, match="MoGe-3"):
        build_moge({**sd, "refiner.encoder_fuse.weight": torch.zeros(1)})
