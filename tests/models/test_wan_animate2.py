"""Wan Animate 2 checked against ComfyUI's own network code on the tiny Animate 2 file.

tests/models/fixtures/comfyui_wan_animate2.json.xz was recorded by scripts/record_comfyui_wan_animate2.py: the
newest ComfyUI's comfy/ldm/wan/model_animate2.py (run at development time on ComfyUI 0.10.0's comfy package,
never committed) on the file nodes.models.wan_demo writes, with the pose branch (default strengths; its own
prompt, CLIP states and strengths; no CLIP vision) and without it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.wan_animate2 import WanAnimate2DiffusionModel, is_animate2, reading_pose_cache, stored_pose_input
from nodes.models.wan_demo import FILES, METADATA, animate2_model
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_animate2.json.xz")
ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("animate2") / FILES["animate2"]
    out.parent.mkdir(parents=True)
    save_file(animate2_model(), out, metadata=METADATA["animate2"])
    return out


@pytest.fixture(scope="module")
def model(path):
    return loader.load_diffusion_model(make_ref("diffusion_model", probe(path).arch, [path]))


def test_tiny_file_is_the_recorded_one(path) -> None:
    assert FIXTURE["file"] == FILES["animate2"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["sha256"], "re-record the fixture"


def test_detected_by_metadata_as_comfyui_does(model, path, tmp_path) -> None:
    assert isinstance(model, WanAnimate2DiffusionModel)
    assert is_animate2({"config": json.dumps({"transformer": {"model_type": "animate2"}})})
    assert not is_animate2({"config": json.dumps({"transformer": {"model_type": "i2v"}})})
    assert not is_animate2({"config": "not json"})
    assert not is_animate2({})
    # the same weights without the metadata are plain Wan 2.1 image-to-video
    plain = tmp_path / "plain.safetensors"
    save_file(animate2_model(), plain, metadata={"format": "pt"})
    loaded = loader.load_diffusion_model(make_ref("diffusion_model", probe(plain).arch, [plain]))
    assert not isinstance(loaded, WanAnimate2DiffusionModel)


def test_metadata_on_other_weights_is_refused(tmp_path) -> None:
    sd = {k: v for k, v in animate2_model().items() if "img" not in k}  # text-to-video's layout
    bad = tmp_path / "t2v_named_animate2.safetensors"
    save_file(sd, bad, metadata=METADATA["animate2"])
    with pytest.raises(ModelLoadError, match="Animate 2"):
        loader.load_diffusion_model(make_ref("diffusion_model", probe(bad).arch, [bad]))


@pytest.mark.parametrize("case", list(FIXTURE["cases"]))
def test_network_equals_comfyui(model, case: str) -> None:
    torch.set_num_threads(1)
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    spec = FIXTURE["cases"][case]["case"]
    x = inputs["x"]
    cond = {"context": inputs["context"], "concat": x[:, 16:]}
    for key in ("clip_fea", "pose_latents", "context_pose", "clip_fea_pose"):
        if spec.get(key):
            cond[key] = inputs[key]
    for key in ("pose_strength", "reference_strength"):
        if key in spec:
            cond[key] = spec[key]
    with torch.no_grad():
        out = model.apply(x[:, :16], inputs["timestep"], cond)
    torch.testing.assert_close(out, tensor(FIXTURE["cases"][case]["out"]), atol=ATOL, rtol=RTOL)


def test_pose_frames_must_match(model) -> None:
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    x = inputs["x"]
    cond = {"context": inputs["context"], "concat": x[:, 16:], "pose_latents": inputs["pose_latents"][:, :, :1]}
    with pytest.raises(ValueError, match="pose branch has 1 latent frames, expected 2"):
        model.apply(x[:, :16], inputs["timestep"], cond)


def _fixture_cond(inputs: dict, spec: dict) -> dict:
    x = inputs["x"]
    cond = {"context": inputs["context"], "concat": x[:, 16:]}
    cond.update({k: inputs[k] for k in ("clip_fea", "pose_latents", "context_pose", "clip_fea_pose") if spec.get(k)})
    cond.update({k: spec[k] for k in ("pose_strength", "reference_strength") if k in spec})
    return cond


@pytest.mark.parametrize("dtype", ["int8", "int4"])
def test_a_filled_quantized_pose_cache_reads_the_stored_inputs(model, dtype: str) -> None:
    """WanAnimate2Cache at int8 / int4: the pass that fills the cache is the plain network (ComfyUI's output);
    the later passes take the pose keys and values from the block inputs after comfy-kitchen's quantization
    round trip (the layouts ComfyUI's quant_ops are), which moves the output a little (about 1 % here); a
    pass without the pose branch is untouched."""
    torch.set_num_threads(1)
    inputs = {k: tensor(v) for k, v in FIXTURE["inputs"].items()}
    x, t = inputs["x"][:, :16], inputs["timestep"]
    pose, no_pose = FIXTURE["cases"]["pose_own_prompt_strengths"], FIXTURE["cases"]["no_pose"]
    with torch.no_grad():
        with reading_pose_cache(None) as filling:
            first = model.apply(x, t, _fixture_cond(inputs, pose["case"]))
        with reading_pose_cache(dtype) as reading:
            later = model.apply(x, t, _fixture_cond(inputs, pose["case"]))
        with reading_pose_cache(dtype) as without_pose:
            plain = model.apply(x, t, _fixture_cond(inputs, no_pose["case"]))
    torch.testing.assert_close(first, tensor(pose["out"]), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(plain, tensor(no_pose["out"]), atol=ATOL, rtol=RTOL)
    assert filling.used and reading.used and not without_pose.used
    diff = float((later - first).abs().max())
    assert 0 < diff < {"int8": 0.02, "int4": 0.2}[dtype] * float(first.abs().max()), diff


def test_stored_pose_input_is_element_0_through_the_kitchen_layout() -> None:
    from comfy_kitchen.tensor import TensorWiseINT8Layout

    x = torch.randn(2, 6, 48)
    x[..., 5] *= 100  # an outlier channel, what the rotation is for
    out = stored_pose_input(x, "int8")
    q, params = TensorWiseINT8Layout.quantize(
        x[0], is_weight=True, per_channel=True, convrot=True, convrot_groupsize=16
    )  # 256 divided by 4 until it divides 48
    torch.testing.assert_close(out[0], TensorWiseINT8Layout.dequantize(q, params), atol=0, rtol=0)
    assert torch.equal(out[1], out[0]) and out.shape == x.shape
    assert 0 < float((out[0] - x[0]).abs().max()) < 0.05 * float(x[0].abs().max())
