"""ControlNetInpaintingAliMamaApply (comfy_extras.nodes_controlnet), as ComfyUI 0.3.64 / 0.10.0 run it for a
ControlNet without a mask channel (every ControlNet that loads here but Qwen-Image's InstantX Inpainting one, tested
in test_qwen_instantx_controlnet.py): Apply ControlNet's result, the mask unused,
the VAE kept only by a ControlNet that takes VAE-encoded hints (SD3's) and left out for an image-hint one (ComfyUI's
set_cond_hint stores it only for a ControlNet with a latent format). Its interface is 0.3.64's
(test_object_info_matches_comfyui)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nodes.library.controlnet_inpaint import ControlNetInpaintingAliMamaApply
from nodes.loaders import make_ref
from nodes.model_nodes import ControlNetApplyAdvanced
from tests.e2e.test_samplers_on_executors import render_in_process
from tests.e2e.test_sd3_prompts import sd3_prompt, with_controlnet

COND = [[torch.zeros(1, 77, 32), {}]]
IMAGE = torch.rand(1, 64, 64, 3, generator=torch.Generator().manual_seed(3))
MASK = torch.zeros(1, 64, 64)


def _specs(out: tuple) -> list[tuple]:
    """Each output cond's ControlNet: its ref (with any VAE option), hint values and settings."""
    specs = [o["control"] for cond in out for _, o in cond]
    return [(s.ref, s.hint.tolist(), s.strength, s.start_percent, s.end_percent) for s in specs]


def test_sd3_controlnet_takes_the_vae_as_apply_controlnet_does(demo_workspace):
    models = demo_workspace.models_dir
    cn = make_ref("controlnet", "sd3", [models / "controlnet/sd3-tiny-controlnet.safetensors"])
    vae = make_ref("vae", "sd3", [models / "checkpoints/sd3-tiny.safetensors"])
    ours = ControlNetInpaintingAliMamaApply().apply_inpaint_controlnet(COND, COND, cn, vae, IMAGE, MASK, 0.8, 0.1, 0.9)
    theirs = ControlNetApplyAdvanced().apply_controlnet(COND, COND, cn, IMAGE, 0.8, 0.1, 0.9, vae=vae)
    assert _specs(ours) == _specs(theirs)
    assert _specs(ours)[0][0].option("vae") == vae


def test_image_hint_controlnet_runs_without_the_vae(demo_workspace):
    models = demo_workspace.models_dir
    cn = make_ref("controlnet", "sd1", [models / "controlnet/sd1-tiny-controlnet.safetensors"])
    vae = make_ref("vae", "sd1", [models / "vae/sd1-tiny-vae.safetensors"])
    ours = ControlNetInpaintingAliMamaApply().apply_inpaint_controlnet(COND, COND, cn, vae, IMAGE, MASK, 1.0, 0.0, 1.0)
    assert _specs(ours) == _specs(ControlNetApplyAdvanced().apply_controlnet(COND, COND, cn, IMAGE, 1.0, 0.0, 1.0))
    assert _specs(ours)[0][0].option("vae") is None


def test_a_bad_mask_is_named(demo_workspace):
    cn = make_ref("controlnet", "sd1", [demo_workspace.models_dir / "controlnet/sd1-tiny-controlnet.safetensors"])
    with pytest.raises(ValueError, match="mask: expected a MASK"):
        ControlNetInpaintingAliMamaApply().apply_inpaint_controlnet(COND, COND, cn, None, IMAGE, "m", 1.0, 0.0, 1.0)


def test_sd3_render_equals_apply_controlnets(demo_workspace):
    torch.set_num_threads(1)
    inpaint = with_controlnet(sd3_prompt(), "ControlNetInpaintingAliMamaApply")
    inpaint["mask"] = {"class_type": "SolidMask", "inputs": {"value": 1.0, "width": 64, "height": 48}}
    inpaint["apply"]["inputs"]["mask"] = ["mask", 0]
    images = render_in_process(
        demo_workspace, {"advanced": with_controlnet(sd3_prompt(), "ControlNetApplyAdvanced"), "inpaint": inpaint}
    )
    assert np.array_equal(images["inpaint"], images["advanced"])
    assert not np.array_equal(images["inpaint"], render_in_process(demo_workspace, {"plain": sd3_prompt()})["plain"])
