"""Wan Animate 2 checked against ComfyUI's own network code on the tiny Animate 2 file.

tests/models/fixtures/comfyui_wan_animate2.json was recorded by scripts/record_comfyui_wan_animate2.py: the
newest ComfyUI's comfy/ldm/wan/model_animate2.py (run at development time on ComfyUI 0.10.0's comfy package,
never committed) on the file nodes.models.wan_demo writes, with the pose branch (default strengths; its own
prompt, CLIP states and strengths; no CLIP vision) and without it."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.wan_animate2 import WanAnimate2DiffusionModel, is_animate2
from nodes.models.wan_demo import FILES, METADATA, animate2_model

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_wan_animate2.json").read_text())
ATOL, RTOL = 1e-5, 1e-4


def tensor(d: dict) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(base64.b64decode(d["f32"]), dtype=np.float32).copy()).reshape(d["shape"])


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
