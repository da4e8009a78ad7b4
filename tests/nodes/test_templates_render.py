"""scripts/templates_render.py's substitution: a template's model files become our tiny files of the same
family (a companion file such as the Flux VAE `ae.safetensors` by the family the prompt's other files name), and
a family without one is refused by name; sizes, steps and frames shrink, inputs become the workspace examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from scripts import templates_render


def test_a_companion_file_maps_by_the_family_the_other_files_name():
    assert templates_render.demo_file("ae.safetensors", ["z_image_turbo_bf16.safetensors"]) == (
        "z-image-turbo-tiny-ae.safetensors"
    )
    assert templates_render.demo_file("ae.safetensors", ["flux1-dev.safetensors"]) == "flux-tiny-ae.safetensors"
    assert templates_render.demo_file("ae.safetensors", ["ovis_image_bf16.safetensors"]) is None
    turbo = "minimax_h3_fl2v_turbo_8step_v1.0_comfyui_bf16.safetensors"  # ComfyUI's key layout, as our tiny LoRA
    assert templates_render.demo_file(turbo, ["minimax_h3_fl2va_pruned_int8_convrot.safetensors", turbo]) == (
        "minimax_h3_lora_tiny.safetensors"
    )
    ref2va = "minimax_h3_ref2va_pruned_int8_convrot.safetensors"  # the same network as fl2va's
    assert templates_render.demo_file(ref2va, [ref2va]) == "minimax_h3_fl2va_pruned_tiny.safetensors"
    fast = "fastvideo_fasth3_8step_v2_pruned_int8_convrot.safetensors"
    assert templates_render.demo_file(fast, [fast]) == "fastvideo_fasth3_tiny.safetensors"


def _ui(nodes: list[dict]) -> dict:
    for i, node in enumerate(nodes, 1):
        node.update(id=i, mode=0, inputs=[], outputs=[])
    return {"nodes": nodes, "links": []}


@pytest.fixture(scope="module")
def registry():
    from comfy_bridge.registry import build_registry

    return build_registry(None, load_custom_nodes=False)


def test_files_inputs_and_sizes_are_substituted(registry, tmp_path):
    ui = _ui(
        [
            {"type": "UNETLoader", "widgets_values": ["z_image_turbo_bf16.safetensors", "default"]},
            {"type": "LoadImage", "widgets_values": ["portrait.jpg", "image"]},
            {"type": "EmptySD3LatentImage", "widgets_values": [1024, 768, 4]},
            {"type": "LoraLoaderModelOnly", "widgets_values": ["some_style.safetensors", 1.0]},
            # saved before ResolutionSelector had `minimum`: the web UI fills its default
            {"type": "ResolutionSelector", "widgets_values": ["1:1 (Square)", 1, 8]},
        ]
    )
    prompt, tripwires = templates_render.tiny_prompt(ui, registry, tmp_path)
    assert prompt["1"]["inputs"]["unet_name"] == "z-image-turbo-tiny.safetensors"
    assert prompt["2"]["inputs"]["image"] == "example.png"
    assert prompt["3"]["inputs"] == {"width": 64, "height": 64, "batch_size": 1}
    selector = prompt["5"]["inputs"]
    assert selector["megapixels"] == 0.1  # shrunk to the least the node takes
    assert selector["minimum"] == registry.node_info("ResolutionSelector")["input"]["required"]["minimum"][1]["default"]
    # a LoRA of no tiny family: an unloadable file of its name, so only a branch that loads it fails
    assert tripwires == ["some_style.safetensors"]
    assert list(load_file(tmp_path / "some_style.safetensors")) == [templates_render.TRIPWIRE_KEY]


def test_ltx25_files_are_substituted():
    """LTX-2.5: the transformer (whose name also fits LTX-2's checkpoint rule) maps to the tiny LTX-2.5 transformer,
    the audio VAE file to the tiny LTX-2.5 audio VAE, the latent upscaler to LTX-2's tiny one (the same layout)."""
    asked = [
        "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors",
        "ltx-2.5-video-vae-bf16.safetensors",
        "ltx-2.5-audio-vae-bf16.safetensors",
    ]
    assert templates_render.demo_file(asked[0], asked) == "ltx-2.5-22b-distilled-transformer_tiny.safetensors"
    assert templates_render.demo_file(asked[2], asked) == "ltx-2.5-audio-vae_tiny.safetensors"
    assert templates_render.demo_file("ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors", asked) == (
        "ltx-2-spatial-upscaler-x2-1.0_tiny.safetensors"
    )


def test_ltx2_files_and_titled_sizes_are_substituted(registry, tmp_path):
    """LTX-2 / 2.3: the LoRAs (whose names start as the checkpoint's) map to the tiny LoRA, the checkpoint, Gemma and
    the upsampler to ltx2-tiny's files; primitives titled Width / Height / Duration (the LTX-2.3 templates feed
    their sizes through math) shrink, other primitives keep their values."""
    ckpt, lora = "ltx-2.3-22b-dev-fp8.safetensors", "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16"
    asked = [ckpt, lora + ".safetensors"]
    assert templates_render.demo_file(ckpt, asked) == "ltx-2-19b-dev_tiny.safetensors"
    assert templates_render.demo_file(lora + ".safetensors", asked) == "ltx-2-19b-lora_tiny.safetensors"
    assert templates_render.demo_file("ltx-2-19b-distilled-lora-384.safetensors", ["ltx-2-19b-dev.safetensors"]) == (
        "ltx-2-19b-lora_tiny.safetensors"
    )
    assert templates_render.demo_file("ltx-2.3-id-lora-talkvid-3k.safetensors", asked) == (  # ID-LoRA's own layout
        "ltx-2.3-id-lora-talkvid-3k_tiny.safetensors"
    )
    assert (
        templates_render.demo_file("gemma_3_12B_it_fp4_mixed.safetensors", asked) == "gemma_3_12B_it_tiny.safetensors"
    )
    assert templates_render.demo_file("gemma_3_12B_it_fp4_mixed.safetensors", ["flux1-dev.safetensors"]) is None
    assert templates_render.demo_file("ltx-2.3-spatial-upscaler-x2-1.1.safetensors", asked) == (
        "ltx-2-spatial-upscaler-x2-1.0_tiny.safetensors"
    )
    ui = _ui(
        [
            {"type": "PrimitiveInt", "title": "Width", "widgets_values": [1280, "fixed"]},
            {"type": "PrimitiveInt", "title": "Height", "widgets_values": [720, "fixed"]},
            {"type": "PrimitiveInt", "title": "Duration", "widgets_values": [5, "fixed"]},
            {"type": "PrimitiveInt", "title": "Frame Rate", "widgets_values": [25, "fixed"]},
            {"type": "PrimitiveInt", "title": "Length", "widgets_values": [121, "fixed"]},
            # a dynamic combo's sizes (LTX-2's Resize Image/Mask) shrink as the plain inputs of those names
            {"type": "ResizeImageMaskNode", "widgets_values": ["scale dimensions", 1280, 720, "center", "lanczos"]},
        ]
    )
    prompt, _ = templates_render.tiny_prompt(ui, registry, tmp_path)
    assert [prompt[str(i)]["inputs"]["value"] for i in range(1, 6)] == [128, 128, 1, 25, 9]
    resize = prompt["6"]["inputs"]
    assert (resize["resize_type.width"], resize["resize_type.height"]) == (64, 64)


def test_a_model_of_a_family_without_a_tiny_file_is_refused_by_name(registry):
    ui = _ui([{"type": "UNETLoader", "widgets_values": ["ernie-image.safetensors", "default"]}])  # ERNIE-Image
    with pytest.raises(ValueError, match="no tiny file of this family for ernie-image.safetensors"):
        templates_render.tiny_prompt(ui, registry)


def test_subgraphs_unpack_under_fresh_ids_with_outer_sources_and_promoted_values():
    sg = {
        "id": "sg-1",
        "inputs": [{"name": "x"}, {"name": "w"}],
        "nodes": [  # inner id 1 collides with the outer node 1
            {"id": 1, "type": "C", "inputs": [{"name": "x", "link": 1}, {"name": "w", "link": 2, "widget": {}}]},
            {"id": 2, "type": "PreviewAny", "inputs": [{"name": "source", "link": 3}]},
        ],
        "links": [
            {"id": 1, "origin_id": -10, "origin_slot": 0, "target_id": 1, "target_slot": 0},
            {"id": 2, "origin_id": -10, "origin_slot": 1, "target_id": 1, "target_slot": 1},
            {"id": 3, "origin_id": 1, "origin_slot": 0, "target_id": 2, "target_slot": 0},
            {"id": 4, "origin_id": 2, "origin_slot": 0, "target_id": -20, "target_slot": 0},
        ],
    }
    instance = {
        "id": 2,
        "type": "sg-1",
        "inputs": [{"name": "x", "link": 10}, {"name": "w", "link": None, "widget": {"name": "w"}}],
        "widgets_values": ["hello"],
    }
    workflow = {
        "nodes": [{"id": 1, "type": "A"}, instance, {"id": 3, "type": "B", "inputs": [{"name": "y", "link": 11}]}],
        "links": [[10, 1, 0, 2, 0, "X"], [11, 2, 0, 3, 0, "Y"]],
        "definitions": {"subgraphs": [sg]},
    }
    flat = templates_render.flat_workflow(workflow)
    by_type = {n["type"]: n for n in flat["nodes"]}
    assert len({n["id"] for n in flat["nodes"]}) == len(flat["nodes"]) == 5  # A, C, PreviewAny, B, the value
    origin = {link[0]: link[1] for link in flat["links"]}
    c_inputs = [origin[i["link"]] for i in by_type["C"]["inputs"]]
    assert c_inputs == [by_type["A"]["id"], by_type["PrimitiveNode"]["id"]]
    assert by_type["PrimitiveNode"]["widgets_values"] == ["hello"]
    # B reads the subgraph's output, which PreviewAny passed on from C
    assert origin[by_type["B"]["inputs"][0]["link"]] == by_type["C"]["id"]


def test_preview_any_passes_on_strings_and_gives_its_text_for_other_types():
    """A PreviewAny showing a string is read through to its source; one showing a number (a combo's index that a
    StringReplace takes, in the Bernini-R templates) stays in the graph: its output is the number's text."""
    workflow = {
        "nodes": [
            {"id": 1, "type": "CustomCombo"},
            {"id": 2, "type": "PreviewAny", "inputs": [{"name": "source", "link": 10}]},
            {"id": 3, "type": "StringReplace", "inputs": [{"name": "replace", "link": 11}]},
            {"id": 4, "type": "PreviewAny", "inputs": [{"name": "source", "link": 12}]},
            {"id": 5, "type": "CLIPTextEncode", "inputs": [{"name": "text", "link": 13}]},
        ],
        "links": [
            [10, 1, 1, 2, 0, "INT"],
            [11, 2, 0, 3, 0, "STRING"],
            [12, 1, 0, 4, 0, "STRING"],
            [13, 4, 0, 5, 0, "STRING"],
        ],
    }
    flat = templates_render.flat_workflow(workflow)
    by_id = {n["id"]: n for n in flat["nodes"]}
    origin = {link[0]: by_id[link[1]]["type"] for link in flat["links"]}
    replace = next(n for n in flat["nodes"] if n["type"] == "StringReplace")
    encode = next(n for n in flat["nodes"] if n["type"] == "CLIPTextEncode")
    assert origin[replace["inputs"][0]["link"]] == "PreviewAny"
    assert origin[encode["inputs"][0]["link"]] == "CustomCombo"


def test_promoted_values_of_a_newer_frontend_follow_the_subgraphs_widget_inputs():
    """A template saved by a newer frontend (image_qwen_image_2_1_image_edit) keeps a value for every widget-typed
    subgraph input, in the subgraph's order, while its instance lists only some of them as inputs."""
    sg = {"inputs": [{"name": "resolution", "type": "INT"}, {"name": "image", "type": "IMAGE"}]}
    sg["inputs"] += [{"name": "prompt", "type": "STRING"}, {"name": "switch", "type": "BOOLEAN"}]
    instance = {"inputs": [{"name": "prompt", "widget": {"name": "prompt"}}], "widgets_values": [0, "edit it", False]}
    assert [templates_render.promoted_value(instance, n, sg) for n in ("resolution", "prompt", "switch")] == [
        0,
        "edit it",
        False,
    ]
    assert templates_render.promoted_value(instance, "image", sg) is None
    assert templates_render.promoted_value(instance, "prompt") is None  # without the subgraph: no order to follow


def test_fine_tunes_of_implemented_families_map_to_their_familys_tiny_files():
    """FireRed Image Edit (Qwen-Image-Edit 2509 retrained, the same transformer layout) and FLUX.1 Fill dev
    OneReward (FLUX.1 Fill fine-tuned) ask for files of families we implement, under their own names."""
    firered = [
        "FireRed-Image-Edit-1.1-transformer.safetensors",
        "qwen_image_vae.safetensors",
        "qwen_2.5_vl_7b_fp8_scaled.safetensors",
    ]
    assert [templates_render.demo_file(n, firered) for n in firered] == [
        "qwen_image_tiny.safetensors",
        "qwen_image_vae_tiny.safetensors",
        "qwen_2.5_vl_7b_edit_tiny.safetensors",  # the edit encoder: TextEncodeQwenImageEditPlus sees the image
    ]
    # its Lightning LoRA's layout is not known here: no tiny stand-in, a tripwire if a branch loads it
    assert templates_render.demo_file("FireRed-Image-Edit-1.0-Lightning-8steps-v1.0.safetensors", firered) is None
    onereward = [
        "flux.1-fill-dev-OneReward-transformer_fp8.safetensors",
        "ae.safetensors",
        "clip_l.safetensors",
        "t5xxl_fp16.safetensors",
    ]
    assert [templates_render.demo_file(n, onereward) for n in onereward] == [
        "flux-fill-tiny.safetensors",
        "flux-tiny-ae.safetensors",
        "flux-tiny-clip_l.safetensors",
        "flux-tiny-t5.safetensors",
    ]


def test_wan22_fun_inpaint_experts_map_to_the_file_its_workflow_runs_on():
    """video_wan2_2_14B_fun_inpaint's two experts and LoRAs map to what workflows_json/wan22_fun_inpaint.json (that
    template on the tiny files, tests/e2e/test_wan_fun_workflow.py) loads."""
    workflow = json.loads((Path(__file__).parents[2] / "workflows_json" / "wan22_fun_inpaint.json").read_text())
    loaded = [
        n["inputs"].get("unet_name") or n["inputs"]["lora_name"]
        for n in workflow.values()
        if "Loader" in n["class_type"] and ("unet_name" in n["inputs"] or "lora_name" in n["inputs"])
    ]
    asked = [
        "wan2.2_fun_inpaint_high_noise_14B_fp8_scaled.safetensors",
        "wan2.2_fun_inpaint_low_noise_14B_fp8_scaled.safetensors",
        "wan2.2_i2v_lightx2v_4steps_lora_v1_high_noise.safetensors",
        "wan2.2_i2v_lightx2v_4steps_lora_v1_low_noise.safetensors",
    ]
    assert sorted(templates_render.demo_file(n, asked) for n in asked) == sorted(loaded)


def test_wan22_text_to_video_experts_map_to_their_fp8_scaled_tiny_files():
    """video_wan2_2_14B_t2v's two experts (ComfyUI's fp8-scaled files) and the Wan companions beside them."""
    asked = [
        "wan2.2_t2v_high_noise_14B_fp8_scaled.safetensors",
        "wan2.2_t2v_low_noise_14B_fp8_scaled.safetensors",
        "umt5_xxl_fp8_e4m3fn_scaled.safetensors",
        "wan_2.1_vae.safetensors",
    ]
    assert [templates_render.demo_file(n, asked) for n in asked] == [
        "wan2.2_t2v_high_noise_14B_fp8_scaled_tiny.safetensors",
        "wan2.2_t2v_low_noise_14B_fp8_scaled_tiny.safetensors",
        "umt5_xxl_tiny.safetensors",
        "wan_2.1_vae_tiny.safetensors",
    ]


def test_a_qwen_image_controlnet_is_not_given_the_familys_tiny_lora():
    """The Qwen-Image templates' LoRAs map to the tiny LoRA by name; their ControlNet files must not (a LoRA file
    given to ControlNetLoader is no ControlNet): InstantX's map to the tiny InstantX ControlNets, the Fun Union's to
    the tiny Fun ControlNet."""
    asked = ["qwen_image_fp8_e4m3fn.safetensors", "Qwen-Image-Lightning-4steps-V1.0.safetensors"]
    assert templates_render.demo_file(asked[1], asked) == "qwen_image_edit_tiny_lightning.safetensors"
    for controlnet, tiny in (
        ("Qwen-Image-InstantX-ControlNet-Inpainting.safetensors", "qwen_image_instantx_inpainting_tiny.safetensors"),
        ("Qwen-Image-InstantX-ControlNet-Union.safetensors", "qwen_image_instantx_union_tiny.safetensors"),
        (
            "Qwen-Image-2512-Fun-Controlnet-Union-2602.safetensors",
            "qwen_image_2512_fun_controlnet_union_tiny.safetensors",
        ),
    ):
        assert templates_render.demo_file(controlnet, [*asked, controlnet]) == tiny


def test_an_input_sound_becomes_the_workspaces_example_sound(registry, tmp_path):
    """Audio-to-video templates (LTX-2.3 ia2v's LoadAudio) load the example sound the demo workspace holds."""
    import wave

    from comfy_bridge.cli.demo_models import write_example_audio

    ui = _ui([{"type": "LoadAudio", "widgets_values": ["ltx_23_audio.mp3", None, None]}])
    prompt, _ = templates_render.tiny_prompt(ui, registry, tmp_path)
    assert prompt["1"]["inputs"]["audio"] == "example.wav"
    write_example_audio(tmp_path / "example.wav")
    with wave.open(str(tmp_path / "example.wav")) as f:
        assert (f.getnchannels(), f.getframerate(), f.getnframes()) == (2, 44100, 44100)


def test_anima_lllite_files_and_the_painters_painting(registry, tmp_path):
    """The Anima LLLite templates' patches map to the tiny inpainting and "any" files, their turbo LoRA to
    anima-tiny's; a Painter's uploaded painting (only its name ships) becomes the workspace's example painting, a
    disc that covers part of the canvas."""
    asked = ["anima-base-v1.0.safetensors", "anima-lllite-inpainting-v2.safetensors"]
    assert templates_render.demo_file(asked[1], asked) == "anima_lllite_inpainting_tiny.safetensors"
    assert templates_render.demo_file("anima-lllite-any-test-like-v2.safetensors", asked) == (
        "anima_lllite_any_tiny.safetensors"
    )
    assert templates_render.demo_file("anima-turbo-lora-v0.2.safetensors", asked) == (
        "anima_turbo_lora_tiny.safetensors"
    )
    ui = _ui([{"type": "Painter", "widgets_values": ["painter/painter-694-1.png [temp]", 1024, 1024, "#000000"]}])
    prompt, _ = templates_render.tiny_prompt(ui, registry, tmp_path)
    assert prompt["1"]["inputs"]["mask"] == templates_render.PAINTING
    from comfy_bridge.cli.demo_models import write_example_painting

    write_example_painting(tmp_path / "painting.png")
    import numpy as np
    from PIL import Image

    alpha = np.asarray(Image.open(tmp_path / "painting.png"))[..., 3]
    assert 0 < (alpha > 0).mean() < 1
