"""Every core node we offer declares ComfyUI 0.3.64's interface, as its `/object_info` reports it
(tests/nodes/fixtures/comfyui_0_3_64_object_info.json, recorded from
ComfyUI 0.3.64 on the CPU with no custom nodes; paid API nodes, descriptions and tooltips left out): input names per section and their order, types,
defaults, ranges, steps, options and flags, outputs, output names, list outputs, output-node flag,
category and module path. Descriptions and tooltips are ours and are not compared; neither are the
file lists of loader combos, which depend on the workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
REFERENCE = Path(__file__).resolve().parent / "fixtures" / "comfyui_0_3_64_object_info.json"
# Core classes ComfyUI added after 0.3.64 that we offer (FLUX.2), with the newest ComfyUI's interface.
NEWER = Path(__file__).resolve().parent / "fixtures" / "comfyui_newer_object_info.json"
# Today's utility core classes we offer (logic, math, lists, batches, ...): recorded from ComfyUI 0.10.0 or read from
# the newest source (the file says which).
TODAY = Path(__file__).resolve().parent / "fixtures" / "comfyui_today_object_info.json"
# TextGenerate (newer than 0.10.0), from the newest source; the file says which commit.
TEXTGEN = Path(__file__).resolve().parent / "fixtures" / "comfyui_textgen_object_info.json"
# CameraAngle (newer than 0.10.0), from the newest source serialised by 0.10.0's io; the file says which commit.
CAMERA_ANGLE = Path(__file__).resolve().parent / "fixtures" / "comfyui_camera_angle.json"
# MiniMax H3's nodes (newer than every ComfyUI that runs here), from the newest source; the file says which commit.
MINIMAX_H3 = Path(__file__).resolve().parent / "fixtures" / "comfyui_minimax_h3_object_info.json"
QWEN_IMAGE21 = Path(__file__).resolve().parent / "fixtures" / "comfyui_qwen_image21_object_info.json"
# Wan Animate 2's nodes (newer than every ComfyUI that runs here), from the newest source; the file says which commit.
WAN_ANIMATE2 = Path(__file__).resolve().parent / "fixtures" / "comfyui_wan_animate2_object_info.json"
# Wan SCAIL-2's two nodes (newer than every ComfyUI that runs here): the newest source's schemas
WAN_SCAIL = Path(__file__).resolve().parent / "fixtures" / "comfyui_wan_scail_object_info.json"
# VOID's six nodes (newer than every ComfyUI that runs here): the newest source's schemas
VOID = Path(__file__).resolve().parent / "fixtures" / "comfyui_void_object_info.json"
# TextEncodeMageFlowEdit (newer than every ComfyUI that runs here), from the newest source.
MAGE_FLOW = Path(__file__).resolve().parent / "fixtures" / "comfyui_mage_flow_object_info.json"
# SeedVR2's nodes (newer than every ComfyUI that runs here), from the newest source.
SEEDVR2 = Path(__file__).resolve().parent / "fixtures" / "comfyui_seedvr2_object_info.json"
# HunyuanVideo 1.5's two nodes, recorded from ComfyUI 0.10.0 with the family's numbers (object_info of that fixture).
HUNYUAN_VIDEO15 = REPO / "tests" / "models" / "fixtures" / "comfyui_hunyuan_video15.json.xz"
# Wan 2.2 S2V's four nodes (audio encoder loader and encode, WanSoundImageToVideo and its Extend), recorded from
# ComfyUI 0.3.64 with the family's numbers (object_info of that fixture; its server had no torchaudio for the other)
WAN_S2V = REPO / "tests" / "models" / "fixtures" / "comfyui_wan_s2v.json.xz"
# BerniniConditioning (newer than every ComfyUI that runs here): the newest source's schema serialised by 0.10.0's io
BERNINI = REPO / "tests" / "models" / "fixtures" / "comfyui_bernini.json.xz"
# WanInfiniteTalkToVideo, recorded from ComfyUI 0.10.0 (object_info of the InfiniteTalk fixture).
INFINITETALK = REPO / "tests" / "models" / "fixtures" / "comfyui_infinitetalk.json.xz"
# Kandinsky 5's two nodes, recorded from ComfyUI 0.10.0 with the family's numbers (object_info of that fixture).
KANDINSKY5 = REPO / "tests" / "models" / "fixtures" / "comfyui_kandinsky5.json.xz"
# Wan-Move's five nodes: the newest source's schemas serialised by 0.10.0's io (object_info of that fixture).
WANMOVE = Path(__file__).resolve().parent / "fixtures" / "comfyui_wanmove.json.xz"
# Inputs whose options are the files of a workspace folder (or of the input folder): only their type is compared.
FILE_COMBOS = {
    "ckpt_name",
    "vae_name",
    "lora_name",
    "clip_name",
    "clip_name1",
    "clip_name2",
    "clip_name3",
    "clip_name4",
    "unet_name",
    "control_net_name",
    "image",
    "model_name",
    "style_model_name",
    "hypernetwork_name",
    "gligen_name",
    "config_name",
    "model_path",
    "audio",
    "video",
    "file",
    "latent",
    "name",
    "folder",
    "conditioning_name",
    "font",
    "text_encoder",  # LTXAVTextEncoderLoader's text_encoders files
    "photomaker_model_name",  # PhotoMakerLoader's photomaker files
    "audio_encoder_name",  # AudioEncoderLoader's audio_encoders files
}
NOT_COMPARED_OPTIONS = {"tooltip"}
# The cluster's own nodes, which ComfyUI does not have.
OURS_ONLY = {"CascadeKSampler"}
# Today's core classes whose ComfyUI source no reference here holds and no ComfyUI that runs here has: known from
# ComfyUI's node documentation (comfyui-embedded-docs 0.5.15, tests/nodes/fixtures/comfyui_today_classes.json) and
# the templates that use them; their interfaces are checked against those in the test named.
DOCUMENTED_ONLY = {
    "Flux3LayoutPrompt": "tests/nodes/test_flux3_nodes.py",
    "ReferenceMultiLatent": "tests/nodes/test_flux3_nodes.py",
    "MOSSImageLayoutPrompt": "tests/nodes/test_moss_image_layout.py",
    # ComfyUI 0.10.0 has it, but its audio nodes need torchaudio and did not load where its object_info was recorded
    "LTXVAudioVAEEncode": "tests/nodes/test_ltxv_audio_encode.py",
    # newer than 0.10.0 (Marigold V2); declared from today's ComfyUI's source
    "MarigoldV2PostProcess": "tests/nodes/test_marigold.py",
    # newer than 0.10.0; declared from today's ComfyUI's source (comfy_extras/nodes_model_patch.py at 08f68f09)
    "AnimaLLLiteApply": "tests/models/test_anima_lllite.py",
    # newer than 0.10.0; declared from today's ComfyUI's source (comfy_extras/nodes_lt.py)
    "GetICLoRAParameters": "tests/nodes/test_ltxv_iclora.py",
    # newer than 0.10.0; declared from today's ComfyUI's source (comfy_extras/nodes_depth_anything_3.py)
    "LoadDA3Model": "tests/models/test_depth_anything3.py",
    "DA3Inference": "tests/models/test_depth_anything3.py",
    "DA3Render": "tests/models/test_depth_anything3.py",
    # newer than 0.10.0; declared from today's ComfyUI's source (comfy_extras/nodes_moge.py)
    "LoadMoGeModel": "tests/models/test_moge.py",
    "MoGeInference": "tests/models/test_moge.py",
    "MoGeRender": "tests/models/test_moge.py",
    # newer than 0.10.0; declared from today's ComfyUI's source (comfy_extras/nodes_sam3.py at a439dcae07d6)
    "SAM3_Detect": "tests/models/test_sam3.py",
    "SAM3_VideoTrack": "tests/models/test_sam3.py",
    "SAM3_TrackToMask": "tests/nodes/test_sam3_nodes.py",
    "SAM3_TrackPreview": "tests/nodes/test_sam3_nodes.py",
    # newer than 0.10.0; declared from today's ComfyUI's source (comfy_extras/nodes_frame_interpolation.py)
    "FrameInterpolationModelLoader": "tests/models/test_frame_interpolation.py",
    "FrameInterpolate": "tests/models/test_frame_interpolation.py",
    # newer than 0.10.0; declared from today's ComfyUI's source (comfy_extras/nodes_lt.py at b2f605a6)
    "LTXVReferenceAudio": "tests/nodes/test_ltxv_reference_audio.py",
}
TODAY_CLASSES = Path(__file__).resolve().parent / "fixtures" / "comfyui_today_classes.json"
# Differences we know of and say in docs/compatibility.md, each with its reason; a gap that closes must leave this table.
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("DualCLIPLoader", "input.required.type"): "ComfyUI 0.10.0's types hunyuan_video_15 (HunyuanVideo 1.5's "
    "Qwen2.5-VL and ByT5), kandinsky5 and kandinsky5_image (Kandinsky 5's Qwen2.5-VL and CLIP-L) are offered",
    ("CLIPLoader", "input.required.type"): "the newest ComfyUI's type flux2 (FLUX.2 Klein's Qwen3) is offered",
    (
        "FluxKontextMultiReferenceLatentMethod",
        "input.required.reference_latents_method",
    ): "today's ComfyUI's option index_timestep_zero (Qwen-Image-Edit 2511's reference method) is offered",
    ("ModelSamplingAuraFlow", "input.optional.sampling"): "today's ComfyUI's optional sampling (flow or "
    "img_to_img_velocity, which Marigold V2's templates set) is offered",
    ("ModelSamplingAuraFlow", "input_order.optional"): "today's ComfyUI's optional sampling input",
    ("ImageScaleToTotalPixels", "input.optional.resolution_steps"): "today's ComfyUI's resolution_steps (the "
    "Mage-Flow edit templates set 16) is offered, optional so that 0.3.64's prompts keep their sizes",
    ("ImageScaleToTotalPixels", "input_order.optional"): "today's ComfyUI's resolution_steps",
    **{
        ("LTXVAddGuide", key): "today's ComfyUI's optional attention_mask and iclora_parameters (the IC-LoRA "
        "templates link Get IC-LoRA Parameters into it) are offered"
        for key in ("input.optional.attention_mask", "input.optional.iclora_parameters", "input_order.optional")
    },
    **{
        ("MaskPreview", key): "today's ComfyUI's MaskPreview passes its mask on (the Anima LLLite inpainting "
        "template wires it into AnimaLLLiteApply); 0.3.64's has no output"
        for key in ("output", "output_is_list", "output_name")
    },
    **{
        ("PreviewAny", key): "today's ComfyUI's PreviewAny passes its text on (the Bernini-R templates turn a "
        "combo's index into the prompt's line number with it); 0.3.64's has no output"
        for key in ("output", "output_is_list", "output_name")
    },
}


def reference() -> dict[str, dict]:
    return {
        **json.loads(REFERENCE.read_text())["classes"],
        **json.loads(NEWER.read_text())["classes"],
        **json.loads(TODAY.read_text())["classes"],
        **json.loads(TEXTGEN.read_text())["classes"],
        **json.loads(CAMERA_ANGLE.read_text())["classes"],
        **json.loads(MINIMAX_H3.read_text())["classes"],
        **json.loads(QWEN_IMAGE21.read_text())["classes"],
        **json.loads(WAN_ANIMATE2.read_text())["classes"],
        **json.loads(WAN_SCAIL.read_text())["classes"],
        **json.loads(VOID.read_text())["classes"],
        **json.loads(SEEDVR2.read_text())["classes"],
        **load_json(HUNYUAN_VIDEO15)["object_info"],
        **load_json(KANDINSKY5)["object_info"],
        **load_json(WANMOVE)["object_info"],
        **load_json(BERNINI)["object_info"],
        **load_json(WAN_S2V)["object_info"],
        **load_json(INFINITETALK)["object_info"],
        **json.loads(MAGE_FLOW.read_text())["classes"],
    }


@pytest.fixture(scope="module")
def ours(demo_workspace) -> dict[str, dict]:
    from comfy_bridge.registry import build_registry

    registry = build_registry(demo_workspace)
    # JSON round trip: what a client sees (tuples become lists)
    return json.loads(json.dumps({name: registry.node_info(name) for name in registry.builtin}))


def _without_prose(value):
    """Options less the tooltips, also those of the inputs inside a dynamic input's options."""
    if isinstance(value, dict):
        return {k: _without_prose(v) for k, v in value.items() if k not in NOT_COMPARED_OPTIONS}
    if isinstance(value, list):
        return [_without_prose(v) for v in value]
    return value


def _input_spec(name: str, spec: list) -> list:
    """[type or options, {options}] with our tooltips dropped and file lists blanked."""
    kind = spec[0]
    options = _without_prose(spec[1] if len(spec) > 1 else {})
    if name in FILE_COMBOS and isinstance(kind, list):
        kind = "<files>"
    if name in FILE_COMBOS and kind == "COMBO":
        options.pop("options", None)
        kind = "<files>"
    return [kind, options]


def interface(info: dict) -> dict:
    """The parts of a node's /object_info entry that must equal ComfyUI's."""
    inputs = {
        section: {name: _input_spec(name, spec) for name, spec in info["input"].get(section, {}).items()}
        for section in ("required", "optional")
    }
    return {
        "input": inputs,
        "input_order": {s: info.get("input_order", {}).get(s, []) for s in ("required", "optional")},
        **{
            k: info.get(k)
            for k in ("output", "output_is_list", "output_name", "output_node", "category", "python_module")
        },
    }


def differences(ours: dict, theirs: dict, path: str = "") -> list[str]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            if key not in ours:
                out.append(f"{path}{key}: missing (ComfyUI: {theirs[key]!r})")
            elif key not in theirs:
                out.append(f"{path}{key}: {ours[key]!r} (ComfyUI has none)")
            else:
                out += differences(ours[key], theirs[key], f"{path}{key}.")
        return out
    return [] if ours == theirs else [f"{path.rstrip('.')}: {ours!r} (ComfyUI: {theirs!r})"]


def test_every_offered_core_class_is_one_of_comfyuis(ours):
    unknown = sorted(set(ours) - set(reference()) - OURS_ONLY - set(DOCUMENTED_ONLY))
    assert not unknown, f"not ComfyUI core classes: {unknown}"


def test_documented_only_classes_are_todays_and_not_recorded():
    today = set(json.loads(TODAY_CLASSES.read_text())["local"])
    assert set(DOCUMENTED_ONLY) <= today
    # once a recording or the source holds one, it is compared as the others are and leaves DOCUMENTED_ONLY
    assert not set(DOCUMENTED_ONLY) & set(reference())
    for name, test in DOCUMENTED_ONLY.items():
        assert name in (REPO / test).read_text()


def test_every_offered_core_class_declares_comfyuis_interface(ours):
    ref = reference()
    found = {
        (name, diff.split(":", 1)[0]): diff
        for name in sorted(set(ours) & set(ref))
        for diff in differences(interface(ours[name]), interface(ref[name]))
    }
    unexplained = {key: diff for key, diff in found.items() if key not in KNOWN_GAPS}
    assert not unexplained, "interfaces differ from ComfyUI 0.3.64:\n" + "\n".join(
        f"{name}: {diff}" for (name, _), diff in unexplained.items()
    )
    closed = sorted(set(KNOWN_GAPS) - set(found))
    assert not closed, f"these known gaps are closed now; remove them from KNOWN_GAPS: {closed}"
