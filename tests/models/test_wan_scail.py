"""Wan SCAIL-2 checked against ComfyUI's own network code on the tiny SCAIL-2 file.

tests/models/fixtures/comfyui_wan_scail.json.xz was recorded by scripts/record_comfyui_wan_scail.py: the newest
ComfyUI's SCAIL2WanModel and WAN21_SCAIL2.extra_conds (run at development time on ComfyUI 0.10.0's comfy package,
never committed) on the file nodes.models.wan_demo writes: references with their identity masks, the half-size
pose latent with its driving masks, in animation and replacement mode, with one reference and no masks, without
CLIP states, and plain."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader, wan_scail
from nodes.models.detect import probe
from nodes.models.wan_demo import FILES, scail2_model
from nodes.models.wan_scail import ScailInputs, WanScailDiffusionModel
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_scail.json.xz")
ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scail") / FILES["scail2"]
    out.parent.mkdir(parents=True)
    save_file(scail2_model(), out, metadata={"format": "pt"})
    return out


@pytest.fixture(scope="module")
def model(path) -> WanScailDiffusionModel:
    return loader.load_diffusion_model(make_ref("diffusion_model", probe(path).arch, [path]))


def test_tiny_file_is_the_recorded_one(path) -> None:
    assert FIXTURE["file"] == FILES["scail2"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["sha256"][FILES["scail2"]], "re-record"


def test_detected_by_its_keys_as_comfyui_does(model, path, tmp_path) -> None:
    assert isinstance(model, WanScailDiffusionModel) and model.scail2
    assert wan_scail.variant(["patch_embedding_pose.weight", "patch_embedding_mask.weight"]) == "scail2"
    assert wan_scail.variant(["patch_embedding_pose.weight"]) == "scail"
    assert wan_scail.variant(["patch_embedding.weight"]) is None
    # without the mask embedding it is SCAIL (the first model): no masks, no replacement mode
    sd = {k: v for k, v in scail2_model().items() if not k.startswith("patch_embedding_mask.")}
    save_file(sd, tmp_path / "scail.safetensors", metadata={"format": "pt"})
    scail = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [tmp_path / "scail.safetensors"]))
    assert isinstance(scail, WanScailDiffusionModel) and not scail.scail2
    assert not hasattr(scail.module, "patch_embedding_mask")


def _extra(inputs: dict, spec: dict) -> ScailInputs:
    ref = spec.get("reference_latent")
    return ScailInputs(
        reference=None if ref is None else inputs["reference_latent" if ref is True else ref],
        pose=inputs["pose_latents"] if spec.get("pose_latents") else None,
        ref_mask=inputs["ref_mask_latents"] if spec.get("ref_mask_latents") else None,
        driving_mask=inputs["sam_latents"] if spec.get("sam_latents") else None,
        replacement=spec.get("ref_mask_flag") is False,
    )


@pytest.mark.parametrize("case", list(FIXTURE["cases"]))
def test_network_equals_comfyui(model, case: str) -> None:
    torch.set_num_threads(1)
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    spec = FIXTURE["cases"][case]["case"]
    clip = inputs["clip_fea"] if spec.get("clip_fea") else None
    with torch.no_grad():
        out = wan_scail.forward(
            model.module, inputs["x"], inputs["timestep"], inputs["context"], clip, _extra(inputs, spec)
        )
    torch.testing.assert_close(out, tensor(FIXTURE["cases"][case]["out"]), atol=ATOL, rtol=RTOL)


def test_step_inputs_are_comfyuis_extra_conds(model) -> None:
    """References (additional first, the primary last) and the pose with 4 channels of ones, masks frames-second,
    the replacement flag: what WAN21_SCAIL2.extra_conds hands the network, from the denoise step's conds."""
    rec = FIXTURE["extra_conds"]
    values = {k: tensor(v) for k, v in rec["values"].items()}
    fmt = model.latent_format
    cond = {
        "ref_latents": [fmt.process_in(values[f"reference_latents.{i}"]) for i in range(2)],
        "pose_latents": fmt.process_in(values["pose_video_latent"]),
        "driving_mask_28ch": values["driving_mask_28ch"],
        "ref_mask_28ch": values["ref_mask_28ch"],
        "ref_mask_flag": False,
    }
    extra = model.inputs(cond, torch.device("cpu"), torch.float32)
    expected = rec["conds"]
    for ours, theirs in (
        (extra.reference, "reference_latent"),
        (extra.pose, "pose_latents"),
        (extra.driving_mask, "sam_latents"),
        (extra.ref_mask, "ref_mask_latents"),
    ):
        torch.testing.assert_close(ours, tensor(expected[theirs]), atol=1e-6, rtol=1e-6)
    assert extra.replacement is (expected["ref_mask_flag"] is False)


def test_history_channels_follow_the_noise_mask() -> None:
    x = torch.zeros(2, 16, 3, 4, 6)
    assert torch.equal(wan_scail.history_mask(None, x), torch.zeros(2, 4, 3, 4, 6))
    mask = torch.ones(1, 16, 3, 4, 6)
    mask[:, :, :2] = 0.0  # two anchor frames kept
    history = wan_scail.history_mask(mask, x)
    assert history.shape == (2, 4, 3, 4, 6)
    assert history[:, :, :2].eq(1).all() and history[:, :, 2:].eq(0).all()


def test_int8_convrot_file_loads_near_the_full_one(model, tmp_path) -> None:
    pytest.importorskip("comfy_kitchen")
    from nodes.models.marigold_demo import int8_convrot

    path = tmp_path / FILES["scail2_int8"].split("/")[1]
    save_file(int8_convrot(scail2_model(), "blocks."), path, metadata={"format": "pt"})
    quantized = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [path]))
    assert isinstance(quantized, WanScailDiffusionModel) and quantized.scail2
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    spec = FIXTURE["cases"]["replacement"]["case"]
    with torch.no_grad():
        outs = [
            wan_scail.forward(
                m.module, inputs["x"], inputs["timestep"], inputs["context"], inputs["clip_fea"], _extra(inputs, spec)
            )
            for m in (model, quantized)
        ]
    diff = (outs[0] - outs[1]).abs().max().item()
    assert 0 < diff < 0.05 * outs[0].abs().max().item()
