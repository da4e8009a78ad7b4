"""Every node's declared interface against ComfyUI's (the reference table in comfyui-protocol.md §11.2 and
ComfyUI's node definitions): input names and order, defaults, ranges, outputs, category, display name."""

from __future__ import annotations

import pytest

from nodes import conditioning_ops, image, image_io, latent

R = 16384
LATENT_METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "bislerp"]
IMAGE_METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]
CROP = ["disabled", "center"]

# class -> (required inputs {name: (type, {option: value} to check)}, outputs, category, display name or None)
REFERENCE = {
    "EmptyLatentImage": (
        {
            "width": ("INT", dict(default=512, min=16, max=R, step=8)),
            "height": ("INT", dict(default=512, min=16, max=R, step=8)),
            "batch_size": ("INT", dict(default=1, min=1, max=4096)),
        },
        ("LATENT",),
        "latent",
        "Empty Latent Image",
    ),
    "EmptySD3LatentImage": (
        {
            "width": ("INT", dict(default=1024, min=16, max=R, step=16)),
            "height": ("INT", dict(default=1024, min=16, max=R, step=16)),
            "batch_size": ("INT", dict(default=1, min=1, max=4096)),
        },
        ("LATENT",),
        "latent/sd3",
        None,
    ),
    "LatentUpscale": (
        {
            "samples": ("LATENT", {}),
            "upscale_method": (LATENT_METHODS, {}),
            "width": ("INT", dict(default=512, min=0, max=R, step=8)),
            "height": ("INT", dict(default=512, min=0, max=R, step=8)),
            "crop": (CROP, {}),
        },
        ("LATENT",),
        "latent",
        "Upscale Latent",
    ),
    "LatentUpscaleBy": (
        {
            "samples": ("LATENT", {}),
            "upscale_method": (LATENT_METHODS, {}),
            "scale_by": ("FLOAT", dict(default=1.5, min=0.01, max=8.0, step=0.01)),
        },
        ("LATENT",),
        "latent",
        "Upscale Latent By",
    ),
    "LatentFromBatch": (
        {
            "samples": ("LATENT", {}),
            "batch_index": ("INT", dict(default=0, min=0, max=63)),
            "length": ("INT", dict(default=1, min=1, max=64)),
        },
        ("LATENT",),
        "latent/batch",
        "Latent From Batch",
    ),
    "RepeatLatentBatch": (
        {"samples": ("LATENT", {}), "amount": ("INT", dict(default=1, min=1, max=64))},
        ("LATENT",),
        "latent/batch",
        "Repeat Latent Batch",
    ),
    "SetLatentNoiseMask": (
        {"samples": ("LATENT", {}), "mask": ("MASK", {})},
        ("LATENT",),
        "latent/inpaint",
        "Set Latent Noise Mask",
    ),
    "ImageScale": (
        {
            "image": ("IMAGE", {}),
            "upscale_method": (IMAGE_METHODS, {}),
            "width": ("INT", dict(default=512, min=0, max=R, step=1)),
            "height": ("INT", dict(default=512, min=0, max=R, step=1)),
            "crop": (CROP, {}),
        },
        ("IMAGE",),
        "image/upscaling",
        "Upscale Image",
    ),
    "ImageScaleBy": (
        {
            "image": ("IMAGE", {}),
            "upscale_method": (IMAGE_METHODS, {}),
            "scale_by": ("FLOAT", dict(default=1.0, min=0.01, max=8.0, step=0.01)),
        },
        ("IMAGE",),
        "image/upscaling",
        "Upscale Image By",
    ),
    "ImageInvert": ({"image": ("IMAGE", {})}, ("IMAGE",), "image", "Invert Image"),
    "ImageBatch": ({"image1": ("IMAGE", {}), "image2": ("IMAGE", {})}, ("IMAGE",), "image", "Batch Images"),
    "EmptyImage": (
        {
            "width": ("INT", dict(default=512, min=1, max=R, step=1)),
            "height": ("INT", dict(default=512, min=1, max=R, step=1)),
            "batch_size": ("INT", dict(default=1, min=1, max=4096)),
            "color": ("INT", dict(default=0, min=0, max=0xFFFFFF, step=1, display="color")),
        },
        ("IMAGE",),
        "image",
        None,
    ),
    "RebatchImages": (
        {"images": ("IMAGE", {}), "batch_size": ("INT", dict(default=1, min=1, max=4096))},
        ("IMAGE",),
        "image/batch",
        "Rebatch Images",
    ),
    "ImagePadForOutpaint": (
        {
            "image": ("IMAGE", {}),
            **{k: ("INT", dict(default=0, min=0, max=R, step=8)) for k in ("left", "top", "right", "bottom")},
            "feathering": ("INT", dict(default=40, min=0, max=R, step=1)),
        },
        ("IMAGE", "MASK"),
        "image",
        "Pad Image for Outpainting",
    ),
    # today's ComfyUI passes the images through (0.3.64's had no output)
    "SaveImage": (
        {"images": ("IMAGE", {}), "filename_prefix": ("STRING", dict(default="ComfyUI"))},
        ("IMAGE",),
        "image",
        "Save Image",
    ),
    "PreviewImage": ({"images": ("IMAGE", {})}, ("IMAGE",), "image", "Preview Image"),
    "LoadImage": ({"image": (None, dict(image_upload=True))}, ("IMAGE", "MASK"), "image", "Load Image"),
    "LoadImageMask": (
        {"image": (None, dict(image_upload=True)), "channel": (["alpha", "red", "green", "blue"], {})},
        ("MASK",),
        "mask",
        "Load Image (as Mask)",
    ),
    "LoadImageOutput": (
        {"image": ("COMBO", dict(image_upload=True, image_folder="output"))},
        ("IMAGE", "MASK"),
        "image",
        "Load Image (from Outputs)",
    ),
    "ConditioningCombine": (
        {"conditioning_1": ("CONDITIONING", {}), "conditioning_2": ("CONDITIONING", {})},
        ("CONDITIONING",),
        "conditioning",
        "Conditioning (Combine)",
    ),
    "ConditioningAverage": (
        {
            "conditioning_to": ("CONDITIONING", {}),
            "conditioning_from": ("CONDITIONING", {}),
            "conditioning_to_strength": ("FLOAT", dict(default=1.0, min=0.0, max=1.0, step=0.01)),
        },
        ("CONDITIONING",),
        "conditioning",
        None,
    ),
    "ConditioningConcat": (
        {"conditioning_to": ("CONDITIONING", {}), "conditioning_from": ("CONDITIONING", {})},
        ("CONDITIONING",),
        "conditioning",
        "Conditioning (Concat)",
    ),
    "FluxGuidance": (
        {"conditioning": ("CONDITIONING", {}), "guidance": ("FLOAT", dict(default=3.5, min=0.0, max=100.0, step=0.1))},
        ("CONDITIONING",),
        "advanced/conditioning/flux",
        None,
    ),
    "ConditioningZeroOut": ({"conditioning": ("CONDITIONING", {})}, ("CONDITIONING",), "advanced/conditioning", None),
    "ConditioningSetTimestepRange": (
        {
            "conditioning": ("CONDITIONING", {}),
            "start": ("FLOAT", dict(default=0.0, min=0.0, max=1.0, step=0.001)),
            "end": ("FLOAT", dict(default=1.0, min=0.0, max=1.0, step=0.001)),
        },
        ("CONDITIONING",),
        "advanced/conditioning",
        None,
    ),
}

MODULES = (latent, image, image_io, conditioning_ops)
CLASSES = {k: v for m in MODULES for k, v in m.NODE_CLASS_MAPPINGS.items()}
DISPLAY = {k: v for m in MODULES for k, v in m.NODE_DISPLAY_NAME_MAPPINGS.items()}


def test_modules_export_exactly_the_reference_nodes():
    assert set(CLASSES) == set(REFERENCE)
    assert set(DISPLAY) <= set(CLASSES)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_interface_matches_comfyui(name, workspace):
    cls = CLASSES[name]
    inputs, outputs, category, display = REFERENCE[name]
    required = cls.INPUT_TYPES()["required"]
    assert list(required) == list(inputs), "input names and order"
    for key, (kind, options) in inputs.items():
        spec = required[key]
        if kind is not None:
            assert spec[0] == kind, key
        given = spec[1] if len(spec) > 1 else {}
        for opt, value in options.items():
            assert given.get(opt) == value, f"{key}.{opt}"
    assert tuple(cls.RETURN_TYPES) == outputs
    assert cls.CATEGORY == category
    assert DISPLAY.get(name) == display
    assert callable(getattr(cls(), cls.FUNCTION))


@pytest.mark.parametrize("name", ["SaveImage", "PreviewImage"])
def test_output_nodes_take_prompt_and_workflow(name, workspace):
    cls = CLASSES[name]
    assert cls.OUTPUT_NODE is True
    assert cls.INPUT_TYPES()["hidden"] == {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"}


def test_only_save_and_preview_are_output_nodes():
    assert {n for n, c in CLASSES.items() if getattr(c, "OUTPUT_NODE", False)} == {"SaveImage", "PreviewImage"}


def test_rebatch_images_takes_and_returns_lists():
    cls = CLASSES["RebatchImages"]
    assert cls.INPUT_IS_LIST is True
    assert tuple(cls.OUTPUT_IS_LIST) == (True,)
    assert cls.RELATIVE_PYTHON_MODULE == "comfy_extras.nodes_rebatch"


def test_load_image_output_is_experimental_with_remote_list():
    opts = CLASSES["LoadImageOutput"].INPUT_TYPES()["required"]["image"][1]
    assert CLASSES["LoadImageOutput"].EXPERIMENTAL is True
    assert opts["remote"] == {
        "route": "/internal/files/output",
        "refresh_button": True,
        "control_after_refresh": "first",
    }


def test_function_names_match_comfyui():
    # Node packs sometimes call these methods directly (e.g. nodes.ImageScale().upscale(...)).
    expected = {
        "EmptyLatentImage": "generate",
        "LatentUpscale": "upscale",
        "LatentFromBatch": "frombatch",
        "RepeatLatentBatch": "repeat",
        "SetLatentNoiseMask": "set_mask",
        "ImageScale": "upscale",
        "ImageInvert": "invert",
        "ImageBatch": "batch",
        "EmptyImage": "generate",
        "ImagePadForOutpaint": "expand_image",
        "SaveImage": "save_images",
        "PreviewImage": "save_images",
        "LoadImage": "load_image",
        "LoadImageMask": "load_image",
        "ConditioningCombine": "combine",
        "ConditioningAverage": "addWeighted",
        "ConditioningConcat": "concat",
        "ConditioningZeroOut": "zero_out",
        "ConditioningSetTimestepRange": "set_range",
    }
    assert {k: CLASSES[k].FUNCTION for k in expected} == expected
