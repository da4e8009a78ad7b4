"""FLUX 3 Image Layout Prompt (Flux3LayoutPrompt) as the FLUX 3 templates use it: its interface as the templates
(widget `prompt`, socket `element` of type ARRAY, output `prompt` STRING) and comfyui-embedded-docs 0.5.15 describe
it (ComfyUI's source of the class was not readable here), the prompt unchanged without elements, and with elements
the box table BFL's reference code gives FLUX 3 (diffusers 0.42's flux3 prompt_upsampler: caption, space, JSON rows
{id obj_N, bbox [y_min, x_min, y_max, x_max] on 0-1000, desc}). The templates' Create Bounding Boxes canvas
(a list-valued widget) converts from the UI format as the web UI sends it ({"__value__": [...]})."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch

from comfy_bridge.formats import ui_to_api
from comfy_bridge.registry import build_registry
from nodes.library.bounding_boxes import CreateBoundingBoxes
from nodes.library.flux3 import Flux3LayoutPrompt, ReferenceMultiLatent


@pytest.fixture(scope="module")
def registry():
    return build_registry(None, load_custom_nodes=False)


def test_object_info_has_the_templates_interface(registry):
    info = json.loads(json.dumps(registry.node_info("Flux3LayoutPrompt")))
    required = info["input"]["required"]
    assert list(required) == ["prompt", "element"] and info["input"].get("optional") in (None, {})
    assert required["prompt"][0] == "STRING" and required["prompt"][1]["multiline"] is True
    assert required["element"][0] == "ARRAY"
    assert (info["output"], info["output_name"], info["display_name"]) == (
        ["STRING"],
        ["prompt"],
        "FLUX 3 Image Layout Prompt",
    )


def test_no_elements_leave_the_prompt_unchanged():
    prompt = "In <ref_image_0>, change the dress color <obj_1> to red"
    assert Flux3LayoutPrompt().execute(prompt, []) == (prompt,)


def test_create_bounding_boxes_elements_become_the_box_table():
    boxes = [
        {"x": 100, "y": 50, "width": 300, "height": 200, "metadata": {"type": "obj", "desc": "a red cup"}},
        {
            "x": 0,
            "y": 900,
            "width": 1000,
            "height": 100,
            "metadata": {"type": "text", "text": "OPEN", "desc": "neon sign", "palette": ["#ff0000"]},
        },
    ]
    (_, _, elements) = CreateBoundingBoxes().execute(1000, 1000, boxes)["result"]
    (out,) = Flux3LayoutPrompt().execute("  a cup <obj_1> under a sign <obj_2> ", elements)
    caption, table = out.split(" [", 1)
    assert caption == "a cup <obj_1> under a sign <obj_2>"
    assert json.loads("[" + table) == [
        {"id": "obj_1", "bbox": [50, 100, 250, 400], "desc": "a red cup"},
        {"id": "obj_2", "bbox": [900, 0, 1000, 1000], "desc": '"OPEN", neon sign'},
    ]


@pytest.mark.parametrize(
    "element,match",
    [("boxes", "expected the ARRAY"), ([{"desc": "no box"}], "item 0 has no bbox"), ([3], "item 0 is int")],
)
def test_bad_elements_are_refused_by_name(element, match):
    with pytest.raises(ValueError, match=f"element: .*{match}"):
        Flux3LayoutPrompt().execute("a prompt", element)


def test_canvas_widget_converts_as_the_web_ui_sends_it(registry):
    """The template's Create Bounding Boxes node saves [width, height, editor_state, last_incoming]; the two
    canvas lists must reach the API prompt as values, not be dropped or read as links."""
    box = {"x": 1, "y": 2, "width": 3, "height": 4, "metadata": {"type": "obj", "desc": "d"}}
    ui = {
        "nodes": [
            {
                "id": 25,
                "type": "CreateBoundingBoxes",
                "inputs": [{"name": "background", "type": "IMAGE", "link": None}],
                "outputs": [],
                "widgets_values": [512, 768, [box], []],
                "mode": 0,
            }
        ],
        "links": [],
    }
    assert ui_to_api(ui, registry)["25"]["inputs"] == {
        "width": 512,
        "height": 768,
        "editor_state": {"__value__": [box]},
        "last_incoming": {"__value__": []},
    }


# ---- Set Reference Multi Latent ---------------------------------------------------------------------------------


def test_reference_multi_latent_object_info_has_the_templates_interface(registry):
    """The edit templates' node: positive, optional negative and vae, the `resolution` dynamic combo ("keep
    resolution" | "resize" with megapixels 0.01-16, default 1) and the growing `images.image0..` sockets."""
    info = json.loads(json.dumps(registry.node_info("ReferenceMultiLatent")))
    required, optional = info["input"]["required"], info["input"]["optional"]
    assert list(required) == ["positive", "resolution"] and list(optional) == ["negative", "vae", "images"]
    options = {o["key"]: o["inputs"]["required"] for o in required["resolution"][1]["options"]}
    assert list(options) == ["keep resolution", "resize"] and options["keep resolution"] == {}
    megapixels = options["resize"]["megapixels"]
    assert megapixels[0] == "FLOAT" and {k: megapixels[1][k] for k in ("default", "min", "max")} == {
        "default": 1.0,
        "min": 0.01,
        "max": 16.0,
    }
    template = optional["images"][1]["template"]
    assert (optional["images"][0], template["prefix"], template["max"]) == ("COMFY_AUTOGROW_V3", "image", 100)
    assert template["input"]["optional"]["image"][0] == "IMAGE"
    assert (info["output"], info["output_name"], info["display_name"]) == (
        ["CONDITIONING", "CONDITIONING", "LATENT"],
        ["positive", "negative", "empty_latent"],
        "Set Reference Multi Latent",
    )


def _cond(value: float) -> list:
    return [[torch.full((1, 4, 8), value), {"pooled_output": None}]]


def test_template_widgets_convert_to_the_dotted_inputs(registry):
    ui = {
        "nodes": [
            {
                "id": 17,
                "type": "ReferenceMultiLatent",
                "inputs": [
                    {"name": "positive", "type": "CONDITIONING", "link": None},
                    {"name": "images.image0", "type": "IMAGE", "link": None},
                ],
                "outputs": [],
                "widgets_values": ["resize", 1],
                "mode": 0,
            }
        ],
        "links": [],
    }
    assert ui_to_api(ui, registry)["17"]["inputs"] == {"resolution": "resize", "resolution.megapixels": 1}


@pytest.fixture(scope="module")
def vae(demo_workspace):
    from nodes.loaders import VAELoader

    (ref,) = VAELoader().load_vae("flux2-klein-tiny-vae.safetensors")
    return ref


def test_images_are_encoded_in_slot_order_and_appended(vae, demo_workspace):
    from nodes.models.loader import load_vae

    gen = torch.Generator().manual_seed(0)
    first, second = torch.rand(1, 80, 48, 3, generator=gen), torch.rand(1, 40, 72, 4, generator=gen)
    earlier = torch.ones(1, 128, 2, 2)
    positive = [[_cond(1.0)[0][0], {"reference_latents": [earlier]}]]
    pos, neg, empty = asyncio.run(
        ReferenceMultiLatent().execute(
            positive, "keep resolution", _cond(2.0), vae, **{"images.image1": second, "images.image0": first}
        )
    )
    module = load_vae(vae)
    expected = [module.encode(first), module.encode(second[..., :3][:, 4:36])]  # 72x40 cropped to 16x: 64x32
    for conditioning, value, before in ((pos, 1.0, [earlier]), (neg, 2.0, [])):
        (entry,) = conditioning
        assert torch.equal(entry[0], torch.full((1, 4, 8), value))
        refs = entry[1]["reference_latents"]
        assert len(refs) == len(before) + 2 and all(torch.equal(a, b) for a, b in zip(refs, before, strict=False))
        for got, want in zip(refs[len(before) :], expected, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert torch.equal(empty["samples"], torch.zeros_like(expected[0])) and expected[0].shape == (1, 128, 5, 3)


def test_resize_scales_to_megapixels_and_negative_defaults_to_positive(vae, demo_workspace):
    image = torch.rand(1, 64, 256, 3, generator=torch.Generator().manual_seed(1))
    pos, neg, empty = asyncio.run(
        ReferenceMultiLatent().execute(
            _cond(1.0), "resize", None, vae, **{"resolution.megapixels": 0.0625, "images.image0": image}
        )
    )
    assert neg is pos
    (ref,) = pos[0][1]["reference_latents"]
    assert ref.shape == (1, 128, 8, 32)  # 0.0625 MP at 4:1 is 512x128 pixels, 1/16 of it
    assert empty["samples"].shape == ref.shape


@pytest.mark.parametrize(
    "resolution,kwargs,side", [("keep resolution", {}, 64), ("resize", {"resolution.megapixels": 0.25}, 32)]
)
def test_without_vae_or_images_conditionings_pass_and_the_latent_is_square(vae, resolution, kwargs, side):
    positive = _cond(1.0)
    for args in ((None,), (vae,)):
        pos, neg, empty = asyncio.run(ReferenceMultiLatent().execute(positive, resolution, None, *args, **kwargs))
        assert pos is positive and neg is positive
        assert torch.equal(empty["samples"], torch.zeros(1, 128, side, side))


def test_bad_resolution_and_images_are_refused_by_name(vae):
    with pytest.raises(ValueError, match="resolution: 'crop'"):
        asyncio.run(ReferenceMultiLatent().execute(_cond(1.0), "crop"))
    with pytest.raises(ValueError, match="images: image0 is not an IMAGE"):
        asyncio.run(ReferenceMultiLatent().execute(_cond(1.0), "keep resolution", None, vae, **{"images.image0": 3}))


def test_references_reach_the_flux3_model_through_ksampler(vae, demo_workspace):
    """KSampler (one Euler step, cfg 1) over the tiny FLUX 3 model with Set Reference Multi Latent's conditioning
    equals one Euler step of the model given the reference latent (image_cond tokens), and differs from none."""
    from nodes.arch import sampling_config
    from nodes.loaders import UNETLoader
    from nodes.model_nodes import KSampler
    from nodes.models.loader import load_diffusion_model
    from nodes.sampling.model_sampling import model_sampling_from_config

    (model,) = UNETLoader().load_unet("flux3_klein_tiny.safetensors", "default")
    context = torch.randn(1, 80, 128, generator=torch.Generator().manual_seed(2))
    positive = [[context, {"pooled_output": None}]]
    image = torch.rand(1, 32, 48, 3, generator=torch.Generator().manual_seed(3))
    pos, neg, empty = asyncio.run(
        ReferenceMultiLatent().execute(positive, "keep resolution", None, vae, **{"images.image0": image})
    )
    latent = {"samples": torch.zeros(1, 128, 3, 2)}
    (with_refs,) = asyncio.run(KSampler().sample(model, 7, 1, 1.0, "euler", "simple", pos, neg, latent))
    (without,) = asyncio.run(KSampler().sample(model, 7, 1, 1.0, "euler", "simple", positive, positive, latent))
    noise = torch.randn((1, 128, 3, 2), generator=torch.Generator().manual_seed(7))
    sigma = float(model_sampling_from_config(sampling_config("flux3")).sigma_max)
    with torch.no_grad():
        v = load_diffusion_model(model).apply(
            noise * sigma, torch.tensor([sigma]), {"context": context, "ref_latents": pos[0][1]["reference_latents"]}
        )
    expected = noise * sigma - sigma * v  # one Euler step from sigma_max to 0 lands on the denoised latent
    torch.testing.assert_close(with_refs["samples"], expected, rtol=0, atol=1e-5)
    assert not torch.allclose(with_refs["samples"], without["samples"], atol=1e-3)
