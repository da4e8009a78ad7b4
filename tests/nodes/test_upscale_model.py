"""UpscaleModelLoader + ImageUpscaleWithModel give ComfyUI's pixels: the demo ESRGAN upscales fixed images
to what ComfyUI 0.3.64's ImageUpscaleWithModel (spandrel's RRDBNet) gave for the same file within float32 rounding
(tests/nodes/fixtures/comfyui_upscale_model.json.xz, recorded by scripts/record_comfyui_upscale_model.py),
tiled and untiled, in every key layout ESRGAN files come in, and through a prompt."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from cluster.refs import ModelRef, file_digest
from nodes.modelfns.upscale_model import UpscaleImageFn, UpscaleParams
from nodes.models.safetensors_io import load_state_dict
from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import at_recorded, load_json, tensor

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from record_comfyui_upscale_model import images  # noqa: E402  (the recorder's own inputs)

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_upscale_model.json.xz")
# Float32 rounding through the RRDB network's convolutions differs between CPUs: the SHA-256s first recorded on
# another machine matched none of the four outputs on an AVX-512 one, where ComfyUI's re-recorded outputs differ
# from ours by at most 1.1e-8. Outputs in 0..1 are compared within 64 ulps of their largest value (7.6e-6), far
# below one 8-bit level.
OUTPUT_ULPS = 64
NAME = "esrgan-tiny-x4.safetensors"


@pytest.fixture(scope="module")
def model_path(demo_workspace) -> Path:
    return demo_workspace.models_dir / "upscale_models" / NAME


def _upscale(path: Path, image: torch.Tensor, **params) -> torch.Tensor:
    fn = UpscaleImageFn()
    model = fn.load_model(ModelRef("upscale_model", "esrgan", (str(path),), (file_digest(path),)))
    with torch.inference_mode():
        return fn.execute(model, {"image": image}, UpscaleParams(**params))["image"]


def test_the_demo_model_is_the_recorded_one(model_path):
    assert hashlib.sha256(model_path.read_bytes()).hexdigest() == FIXTURE["model_sha256"]


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_upscale_equals_comfyui_within_float32_rounding(model_path, fixed_threads, case):
    out = _upscale(model_path, images()[case])
    recorded = FIXTURE["cases"][case]
    theirs = tensor(recorded)
    diff = (at_recorded(out, recorded) - theirs).abs().max().item()
    assert diff <= ulps_of_largest(theirs, OUTPUT_ULPS), diff


def _new_layout(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The demo file in Real-ESRGAN's key names (conv_first, body.N.rdbM.convK, conv_up1, conv_hr ...)."""
    names = {
        "model.0": "conv_first",
        "model.1.sub.1": "conv_body",
        "model.3": "conv_up1",
        "model.6": "conv_up2",
        "model.8": "conv_hr",
        "model.10": "conv_last",
    }
    out = {}
    for k, v in sd.items():
        m = re.match(r"model\.1\.sub\.(\d+)\.RDB(\d)\.conv(\d)\.0\.(weight|bias)$", k)
        out[
            f"body.{m[1]}.rdb{m[2]}.conv{m[3]}.{m[4]}" if m else names[k.rsplit(".", 1)[0]] + "." + k.rsplit(".", 1)[1]
        ] = v
    return out


def test_real_esrgan_key_layout_loads_to_the_same_pixels(model_path, tmp_path, fixed_threads):
    renamed = tmp_path / "renamed.safetensors"
    save_file(_new_layout(load_state_dict(model_path)), str(renamed))
    image = images()["small"]
    assert torch.equal(_upscale(renamed, image), _upscale(model_path, image))


def test_smaller_tiles_blend_close_to_the_whole_image(model_path):
    image = images()["wider_than_a_tile"]
    whole, tiled = _upscale(model_path, image, tile=1024), _upscale(model_path, image, tile=128)
    assert tiled.shape == whole.shape and (tiled - whole).abs().max() < 0.05


def test_loader_refuses_files_that_are_not_upscale_models(demo_workspace):
    from nodes.library.upscale_model import UpscaleModelLoader

    folder = demo_workspace.models_dir / "upscale_models"
    shutil.copy(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors", folder / "not-esrgan.safetensors")
    try:
        with pytest.raises(ValueError, match="model_name: 'not-esrgan.safetensors' is not an upscale model"):
            UpscaleModelLoader().load_model("not-esrgan.safetensors")
    finally:
        (folder / "not-esrgan.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model_name"):
        UpscaleModelLoader().load_model("missing.safetensors")


UPSCALE_PROMPT = {
    "1": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
    "2": {"class_type": "UpscaleModelLoader", "inputs": {"model_name": NAME}},
    "3": {"class_type": "ImageUpscaleWithModel", "inputs": {"upscale_model": ["2", 0], "image": ["1", 0]}},
    "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": "upscaled"}},
}


def test_upscale_prompt_runs_through_the_engine(demo_workspace, model_path, fixed_threads):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry
    from nodes.image_io import LoadImage

    (path,) = asyncio.run(
        run_prompt(json.loads(json.dumps(UPSCALE_PROMPT)), None, build_registry(demo_workspace), show_progress=False)
    )
    saved = np.asarray(Image.open(path))
    expected = _upscale(model_path, LoadImage().load_image("example.png")[0])[0].numpy()
    assert saved.shape == (512, 512, 3)
    assert np.array_equal(saved, np.clip(255.0 * expected, 0, 255).astype(np.uint8))


def test_a_torch_file_wrapping_the_weights_in_params_ema_loads(model_path, tmp_path, fixed_threads):
    wrapped = tmp_path / "RealESRGAN_tiny.pth"
    torch.save({"params_ema": _new_layout(load_state_dict(model_path))}, wrapped)
    image = images()["small"]
    assert torch.equal(_upscale(wrapped, image), _upscale(model_path, image))
