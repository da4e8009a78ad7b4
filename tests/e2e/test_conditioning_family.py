"""The conditioning and encoder nodes end to end on the demo models: area and mask conditioning, the
inpainting encoders and the tiled encoder each change the image; the SDXL and Flux encoders given what the
plain encoder implies (the latent's size, no crop; one text for both encoders, guidance 3.5) give the plain
encoder's image and otherwise change it; and every case renders the in-process image on two executors (the
areas, masks and sizes travel with the denoise steps)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.e2e.test_samplers_on_executors import BASE_PROMPT, REPO, differing_cases, render_in_process, render_on_server

TEXT = "beautiful scenery nature glass bottle landscape, purple galaxy bottle"


def _sd1(case: str, size: int = 64) -> dict:
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["3"]["inputs"].update(steps=4, sampler_name="euler", scheduler="normal")
    prompt["5"]["inputs"].update(width=size, height=size)
    prompt["9"]["inputs"]["filename_prefix"] = f"condfam_{case}"
    return prompt


def _with_second_prompt(case: str, node: dict, size: int = 64) -> dict:
    """The positive prompt combined with a second prompt ("red lava") passed through `node`."""
    prompt = _sd1(case, size)
    prompt["20"] = {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "red lava, fire"}}
    prompt["21"] = {**node, "inputs": {"conditioning": ["20", 0], **node["inputs"]}}
    prompt["22"] = {
        "class_type": "ConditioningCombine",
        "inputs": {"conditioning_1": ["6", 0], "conditioning_2": ["21", 0]},
    }
    prompt["3"]["inputs"]["positive"] = ["22", 0]
    return prompt


def _mask_nodes(prompt: dict) -> list:
    """A 64x64 mask, 1 in a 24x32 box at (8, 16), 0.5 in a corner."""
    prompt["30"] = {"class_type": "SolidMask", "inputs": {"value": 0.0, "width": 64, "height": 64}}
    prompt["31"] = {"class_type": "SolidMask", "inputs": {"value": 1.0, "width": 24, "height": 32}}
    prompt["32"] = {"class_type": "SolidMask", "inputs": {"value": 0.5, "width": 8, "height": 8}}
    prompt["33"] = {
        "class_type": "MaskComposite",
        "inputs": {"destination": ["30", 0], "source": ["31", 0], "x": 8, "y": 16, "operation": "add"},
    }
    prompt["34"] = {
        "class_type": "MaskComposite",
        "inputs": {"destination": ["33", 0], "source": ["32", 0], "x": 56, "y": 56, "operation": "add"},
    }
    return ["34", 0]


def _mask_case(case: str, set_cond_area: str) -> dict:
    prompt = _sd1(case)
    mask = _mask_nodes(prompt)
    return _merge(
        prompt,
        _with_second_prompt(
            case,
            {
                "class_type": "ConditioningSetMask",
                "inputs": {"mask": mask, "strength": 0.8, "set_cond_area": set_cond_area},
            },
        ),
    )


def _merge(a: dict, b: dict) -> dict:
    return {**b, **{k: v for k, v in a.items() if k not in b}}


def _image_input(prompt: dict) -> list:
    """A 64x64 image of one colour."""
    prompt["40"] = {
        "class_type": "EmptyImage",
        "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0x3366CC},
    }
    return ["40", 0]


def _inpaint(case: str) -> dict:
    prompt = _sd1(case)
    mask, pixels = _mask_nodes(prompt), _image_input(prompt)
    prompt["41"] = {
        "class_type": "VAEEncodeForInpaint",
        "inputs": {"pixels": pixels, "vae": ["4", 2], "mask": mask, "grow_mask_by": 6},
    }
    prompt["3"]["inputs"]["latent_image"] = ["41", 0]
    return prompt


def _inpaint_conditioning(case: str) -> dict:
    prompt = _sd1(case)
    mask, pixels = _mask_nodes(prompt), _image_input(prompt)
    prompt["42"] = {
        "class_type": "InpaintModelConditioning",
        "inputs": {
            "positive": ["6", 0],
            "negative": ["7", 0],
            "vae": ["4", 2],
            "pixels": pixels,
            "mask": mask,
            "noise_mask": True,
        },
    }
    prompt["3"]["inputs"].update(positive=["42", 0], negative=["42", 1], latent_image=["42", 2])
    return prompt


def _tiled(case: str) -> dict:
    prompt = _sd1(case)
    prompt["5"]["inputs"].update(width=128, height=128)
    pixels = _image_input(prompt)
    prompt["40"]["inputs"].update(width=128, height=128)
    prompt["43"] = {
        "class_type": "VAEEncodeTiled",
        "inputs": {
            "pixels": pixels,
            "vae": ["4", 2],
            "tile_size": 64,
            "overlap": 0,
            "temporal_size": 64,
            "temporal_overlap": 8,
        },
    }
    prompt["3"]["inputs"].update(latent_image=["43", 0], denoise=0.6)
    return prompt


def _sdxl(case: str, **sizes) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "sdxl.json").read_text())
    prompt["3"]["inputs"].update(steps=3, sampler_name="euler", scheduler="normal")
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"condfam_{case}"
    if sizes:
        prompt["6"] = {
            "class_type": "CLIPTextEncodeSDXL",
            "inputs": {"clip": ["4", 1], "text_g": TEXT, "text_l": sizes.pop("text_l", TEXT), **sizes},
        }
    return prompt


def _sdxl_refiner(case: str) -> dict:
    prompt = _sdxl(case)
    prompt["6"] = {
        "class_type": "CLIPTextEncodeSDXLRefiner",
        "inputs": {"clip": ["4", 1], "text": TEXT, "ascore": 6.0, "width": 640, "height": 64},
    }
    return prompt


def _flux(case: str, encoder: dict | None) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "flux.json").read_text())
    prompt["3"]["inputs"].update(steps=2)
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"condfam_{case}"
    if encoder is not None:
        prompt["13"] = {"class_type": "CLIPTextEncodeFlux", "inputs": {"clip": ["11", 0], **encoder}}
    return prompt


def _controlnet(case: str, controlnet_text: str | None = None, diff_loader: bool = False) -> dict:
    prompt = json.loads((REPO / "workflows_json" / "controlnet.json").read_text())
    prompt["3"]["inputs"].update(steps=3)
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"condfam_{case}"
    if controlnet_text is not None:
        prompt["13"] = {
            "class_type": "CLIPTextEncodeControlnet",
            "inputs": {"clip": ["4", 1], "conditioning": ["12", 0], "text": controlnet_text},
        }
        prompt["3"]["inputs"]["positive"] = ["13", 0]
    if diff_loader:
        prompt["10"] = {
            "class_type": "DiffControlNetLoader",
            "inputs": {"model": ["4", 0], "control_net_name": "sd1-tiny-controlnet.safetensors"},
        }
    return prompt


def _flux_guidance(case: str, before: float, disable: bool, after: float | None = None) -> dict:
    """flux.json's FluxGuidance at `before`, then FluxDisableGuidance, then FluxGuidance at `after`."""
    prompt = _flux(case, None)
    prompt["13"]["inputs"]["guidance"] = before
    last = ["13", 0]
    if disable:
        prompt["14"] = {"class_type": "FluxDisableGuidance", "inputs": {"conditioning": last}}
        last = ["14", 0]
    if after is not None:
        prompt["15"] = {"class_type": "FluxGuidance", "inputs": {"conditioning": last, "guidance": after}}
        last = ["15", 0]
    prompt["3"]["inputs"]["positive"] = last
    return prompt


def _t5_options(case: str, min_padding: int, min_length: int) -> dict:
    prompt = _flux(case, None)
    prompt["16"] = {
        "class_type": "T5TokenizerOptions",
        "inputs": {"clip": ["11", 0], "min_padding": min_padding, "min_length": min_length},
    }
    prompt["6"]["inputs"]["clip"] = ["16", 0]
    return prompt


SAME_SIZE = dict(width=64, height=64, crop_w=0, crop_h=0, target_width=64, target_height=64)
CASES = {
    "sd1_plain": _sd1("sd1_plain"),
    "sd1_plain_128": _sd1("sd1_plain_128", 128),
    "area": _with_second_prompt(
        "area",
        {"class_type": "ConditioningSetArea", "inputs": {"width": 64, "height": 80, "x": 40, "y": 16, "strength": 1.0}},
        128,
    ),
    "area_percentage": _with_second_prompt(
        "area_percentage",
        {
            "class_type": "ConditioningSetAreaPercentage",
            "inputs": {"width": 0.5, "height": 0.75, "x": 0.5, "y": 0.0, "strength": 1.5},
        },
    ),
    "area_strength": _with_second_prompt(
        "area_strength", {"class_type": "ConditioningSetAreaStrength", "inputs": {"strength": 0.3}}
    ),
    "mask": _mask_case("mask", "default"),
    "mask_bounds": _mask_case("mask_bounds", "mask bounds"),
    "inpaint": _inpaint("inpaint"),
    "inpaint_conditioning": _inpaint_conditioning("inpaint_conditioning"),
    "tiled": _tiled("tiled"),
    "sdxl_plain": _sdxl("sdxl_plain"),
    "sdxl_same_sizes": _sdxl("sdxl_same_sizes", **SAME_SIZE),
    "sdxl_sizes": _sdxl("sdxl_sizes", **{**SAME_SIZE, "width": 1024, "height": 768, "crop_w": 32, "crop_h": 16}),
    "sdxl_two_texts": _sdxl("sdxl_two_texts", **SAME_SIZE, text_l="a red house " * 30),
    "sdxl_refiner": _sdxl_refiner("sdxl_refiner"),
    "controlnet_plain": _controlnet("controlnet_plain"),
    "controlnet_same_text": _controlnet("controlnet_same_text", BASE_PROMPT["6"]["inputs"]["text"]),
    "controlnet_other_text": _controlnet("controlnet_other_text", "red lava, fire"),
    "controlnet_diff_loader": _controlnet("controlnet_diff_loader", diff_loader=True),
    "flux_plain": _flux("flux_plain", None),
    "t5_default_padding": _t5_options("t5_default_padding", 0, 256),
    "t5_no_padding": _t5_options("t5_no_padding", 0, 0),
    "flux_no_guidance": _flux_guidance("flux_no_guidance", 1.0, True),
    "flux_no_guidance_from_6": _flux_guidance("flux_no_guidance_from_6", 6.0, True),
    "flux_guidance_again": _flux_guidance("flux_guidance_again", 6.0, True, 3.5),
    "flux_same": _flux(
        "flux_same",
        {
            "clip_l": "a glass bottle with a purple galaxy inside",
            "t5xxl": "a glass bottle with a purple galaxy inside",
            "guidance": 3.5,
        },
    ),
    "flux_two_texts": _flux(
        "flux_two_texts",
        {"clip_l": "a red house", "t5xxl": "a glass bottle with a purple galaxy inside", "guidance": 3.5},
    ),
}


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, CASES)


@pytest.mark.parametrize(
    "case,plain",
    [
        ("area", "sd1_plain_128"),
        ("area_percentage", "sd1_plain"),
        ("area_strength", "sd1_plain"),
        ("mask", "sd1_plain"),
        ("mask_bounds", "sd1_plain"),
        ("mask_bounds", "mask"),
        ("inpaint", "sd1_plain"),
        ("inpaint_conditioning", "sd1_plain"),
        ("inpaint_conditioning", "inpaint"),
        ("tiled", "sd1_plain"),
        ("sdxl_sizes", "sdxl_plain"),
        ("sdxl_two_texts", "sdxl_plain"),
        ("sdxl_refiner", "sdxl_plain"),
        ("flux_two_texts", "flux_plain"),
        ("controlnet_other_text", "controlnet_plain"),
        ("flux_no_guidance", "flux_plain"),
        ("t5_no_padding", "flux_plain"),
    ],
)
def test_each_node_changes_the_image(in_process_images, case, plain):
    assert not np.array_equal(in_process_images[case], in_process_images[plain])


@pytest.mark.parametrize(
    "case,plain",
    [
        ("sdxl_same_sizes", "sdxl_plain"),
        ("flux_same", "flux_plain"),
        ("controlnet_same_text", "controlnet_plain"),
        ("controlnet_diff_loader", "controlnet_plain"),
        ("flux_no_guidance_from_6", "flux_no_guidance"),
        ("flux_guidance_again", "flux_plain"),
        ("t5_default_padding", "flux_plain"),
    ],
)
def test_encoders_given_the_plain_encoders_inputs_give_its_image(in_process_images, case, plain):
    assert np.array_equal(in_process_images[case], in_process_images[plain])


def test_two_executors_give_the_in_process_images(serve, in_process_images):
    base = serve("--executors", "2", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, CASES), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
