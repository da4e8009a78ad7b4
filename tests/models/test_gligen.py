"""GLIGEN (issue 38): a GLIGEN file's layers and position net loaded on diffusers' GLIGEN modules and run in the SD
UNet for text boxes, equal to ComfyUI 0.3.64 on the demo's tiny files (fixture from scripts/record_comfyui_gligen.py:
ComfyUI's load_gligen and middle patch on the same files); the other sides of the sampling get the prompt's boxes
as ComfyUI gives them; bad inputs are named."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.modelfns.gligen import fill_other_side, group_key
from nodes.models.demo import save_tiny
from nodes.models.gligen import load_gligen
from nodes.models.gligen_demo import sd1_gligen_files
from nodes.models.loader import load_diffusion_model
from nodes.models.safetensors_io import load_state_dict
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_gligen.json").read_text())


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path]:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("models")
    checkpoint, gligen = sd1_gligen_files()
    ckpt, gl = (
        save_tiny(checkpoint, root / "sd1-gligen-tiny.safetensors"),
        save_tiny(gligen, root / "gligen-sd1-tiny.safetensors"),
    )
    assert hashlib.sha256(ckpt.read_bytes()).hexdigest() == FIXTURE["sha256"]["sd1-gligen-tiny"]
    assert hashlib.sha256(gl.read_bytes()).hexdigest() == FIXTURE["sha256"]["gligen-sd1-tiny"]
    return ckpt, gl


@pytest.fixture(scope="module")
def unet(files):
    return load_diffusion_model(ModelRef("diffusion_model", "sd1", (str(files[0]),), (file_digest(files[0]),)))


@pytest.fixture(scope="module")
def gligen(files):
    return load_gligen(load_state_dict(str(files[1])), str(files[1]))


def _denoised(unet, case: dict, cond: dict) -> torch.Tensor:
    ms = model_sampling_from_config(unet.sampling)
    sigma, x = torch.tensor([case["sigma"]]), tensor(case["x"])
    with torch.no_grad():
        eps = unet.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), {"context": tensor(case["context"]), **cond})
    return ms.calculate_denoised(sigma, eps, x)


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["name"])
def test_unet_with_text_boxes_equals_comfyui(unet, gligen, case):
    boxes = [(tensor(p), *box) for p, box in zip(case["pooled"], case["boxes"])]
    batch = tensor(case["x"]).shape[0]
    objs = gligen.objects(boxes, tuple(case["latent_hw"]), batch)
    theirs = tensor(case["denoised"])
    # A whole UNet evaluation recorded on another CPU: float32 rounding accumulates through its layers, so the bound
    # is 1e-5 or 64 ulps of the largest value where that is more (measured on an AVX-512 CPU: 1.5e-5 at a largest
    # value of 6.6, 31 ulps; a missing or misplaced box moves the result by more than 1e-3, asserted below).
    ours = _denoised(unet, case, {"gligen": (gligen, objs)})
    assert (ours - theirs).abs().max().item() <= max(1e-5, ulps_of_largest(theirs, 64))
    plain = _denoised(unet, case, {})  # the same UNet without the boxes: ComfyUI's too, and not the same image
    without = tensor(case["without_gligen"])
    assert (plain - without).abs().max().item() <= max(1e-5, ulps_of_largest(without, 64))
    assert (plain - theirs).abs().max() > 1e-3


def test_the_layers_follow_comfyuis_order_and_head_rule(gligen):
    assert [f.linear.weight.shape[0] for f in gligen.fusers] == [64, 128, 64, 64]  # input 1, middle, output 3, 4
    assert [f.attn.heads for f in gligen.fusers] == [1, 2, 1, 1]  # 64-wide heads: the tokens are not 768 wide
    with pytest.raises(ValueError, match="at most 30 text boxes"):
        gligen.objects([(torch.zeros(1, 64), 1, 1, 0, 0)] * 31, (8, 8), 1)


def test_other_sides_get_the_prompts_boxes_as_in_comfyui():
    boxes = {"ref": "g", "boxes": [[1, 2, 3, 4]], "source": "positive.0"}
    positive = [{"key": "positive.0", "gligen": boxes}, {"key": "positive.1", "area": (8, 8, 0, 0), "gligen": boxes}]
    negative = [{"key": "negative.0"}, {"key": "negative.1", "area": (8, 8, 0, 0)}]
    filled = fill_other_side(positive, negative)
    assert filled[0]["gligen"] is boxes and "gligen" not in filled[1]  # areas are left alone
    assert "gligen" not in negative[0]  # the input list is not changed
    own = [{"key": "negative.0", "gligen": {**boxes, "source": "negative.0"}}]
    assert fill_other_side(positive, own) is own  # a side with boxes of its own keeps them


def test_entries_with_and_without_boxes_never_share_a_pass():
    ref = ModelRef("gligen", "gligen", ("a",), ("d",))
    spec = {"ref": ref, "boxes": [[1, 2, 3, 4]], "source": "positive.0"}
    assert group_key({"key": "negative.0"}) is None
    assert group_key({"key": "positive.0", "gligen": spec}) == group_key({"key": "negative.0", "gligen": spec})
    assert group_key({"gligen": {**spec, "boxes": [[1, 2, 3, 5]]}}) != group_key({"gligen": spec})
