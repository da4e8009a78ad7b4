"""The part of docs/nodes.md about today's ComfyUI (issue 34): the utility classes offered beyond 0.3.64, how
many of the web UI's local templates have every node offered (docs/benchmarks/templates.json, written by
scripts/templates_coverage.py) and what share of their usage renders on the tiny demo files (its render half,
written by scripts/templates_render.py), and each class those templates still lack, with its reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TODAY = REPO / "tests" / "nodes" / "fixtures" / "comfyui_today_object_info.json"
TEMPLATES = REPO / "docs" / "benchmarks" / "templates.json"
# Today's local core classes (comfyui-embedded-docs 0.5.15 less the paid API nodes), written by
# scripts/record_comfyui_today_classes.py.
TODAY_CLASSES = TODAY.with_name("comfyui_today_classes.json")
TEXTGEN = TODAY.with_name("comfyui_textgen_object_info.json")  # TextGenerate's interface, from the newest source

MEDIA = "audio model families (ACE-Step, MiniMax Music, YuE, audio encoders) are not implemented"
THREE_D = "3D models, meshes and splats are not implemented"
DETECTION = (
    "detection / segmentation / depth models (SAM 3, RT-DETR, MoGe, Depth Anything 3, SDPose, background "
    "removal, optical flow) are not implemented"
)
UTILITY = "a model-free utility node of today's ComfyUI not written yet"
# (pattern on the class name, reason), first match wins; the families are the model-family issues' work.
RULES: list[tuple[str, str]] = [
    (
        r"LTX",
        "an LTX node of today's ComfyUI not written yet (LTX-2's image-, text-, audio-, first/last-frame-to-video and "
        "ID-LoRA templates with guides, the reference audio, the latent upsampler and the prompt enhancer run, and "
        "LTX-Video 0.9's)",
    ),
    (
        r"Audio|^(LoadVideo|SaveVideo|CreateVideo|GetVideoComponents|Video Slice|RecordAudio)$|Music|YuE2|SheetSage|"
        r"AceStep|ABC$",
        MEDIA,
    ),
    (
        r"Trellis|Mesh|3D|Voxel|GLB|Splat|Hunyuan3D|Pixal3D|SAM3DBody|Bake|UnwrapMesh|RenderUVAtlas|CameraInfo|"
        r"BuildPoseFile|CameraAngle",
        THREE_D,
    ),
    (
        r"^(SAM3_|RTDETR|MoGe|LoadMoGe|DA3|LoadDA3|SDPose|RemoveBackground|LoadBackgroundRemovalModel|OpticalFlow|"
        r"MarigoldV2)",
        DETECTION,
    ),
    (
        r"^(Wan|Empty.*Wan|TrimVideoLatent|ContextWindows|SCAIL|GenerateTracks|NormalizeVideoLatent|"
        r"ReplaceVideoLatentFrames|ARVideo|SamplerARVideo|FrameInterpolat|VOID|Kandinsky5|HunyuanVideo|EmptyHunyuan)",
        "video model families (Wan, Hunyuan Video, Kandinsky 5, ...) are not implemented",
    ),
    (
        r"MiniMax",
        "MiniMax H3 runs text-, first/last-frame- and reference-image-to-video with image guides and its audio; "
        "its Fun ControlNet is not implemented",
    ),
    (
        r"Qwen|ModelPatchLoader|Diffsynth",
        "Qwen-Image patches are not implemented (the DiffSynth ControlNet runs)",
    ),
    (r"SeedVR2", "the SeedVR2 upscaler family is not implemented"),
    (r"HiDreamO1", "HiDream-O1 is not implemented (HiDream-I1 and E1 run)"),
    (
        # ComfyUI's source of the two classes is not in any store here (its code index has no MOSS module, the
        # snapshots are 0.3.64 and 0.10.0), nor is another implementation of the edit LoRA or the control adapter
        r"^(MOSSImageControl|TextEncodeMOSSImageEdit)$",
        "MOSS-Image's edit and color/depth control are not implemented (its text-to-image and layout prompt run; "
        "how their reference latents and control maps enter the DiT is in no source readable here)",
    ),
    (
        r"Chroma|Lotus|Bernini|Flux3|FluxKV|MOSS|Ming|Mage|Boogu|Joy|Fibo|Ideogram|PiD|Anima|unCLIP|AliMama|"
        r"ReferenceMultiLatent|ConditioningLoader|GetICLoRA|ICLoRA",
        "an image model family not implemented yet",
    ),
    (r"^BlockSparseAttention$", "a model patch or sampler of today's ComfyUI not written yet"),
]


def reason(cls: str) -> str:
    return next((why for pattern, why in RULES if re.search(pattern, cls)), UTILITY)


def today_local_classes() -> list[str]:
    return json.loads(TODAY_CLASSES.read_text())["local"]


def render_today(offered: set[str], of_0_3_64: set[str]) -> list[str]:
    listed = set(json.loads(TODAY.read_text())["classes"]) | set(json.loads(TEXTGEN.read_text())["classes"])
    today = sorted((listed & offered) - of_0_3_64, key=str.lower)
    changed = sorted(listed & offered & of_0_3_64, key=str.lower)
    local = today_local_classes()
    lines = [
        "",
        "## Today's ComfyUI",
        "",
        f"**{len(offered & set(local))} of today's {len(local)} local core classes offered**: the classes "
        "documented by ComfyUI's node documentation package (comfyui-embedded-docs 0.5.15) less its paid API "
        "nodes and the frontend-only types (tests/nodes/fixtures/comfyui_today_classes.json, written by "
        "scripts/record_comfyui_today_classes.py, says how each was classified).",
        "",
        f"Also offered, today's core utility classes added after 0.3.64 ({len(today)}): {', '.join(today)}. Each "
        "declares the interface ComfyUI 0.10.0 reports or, for those newer than 0.10.0, the newest ComfyUI "
        "source gives it (tests/nodes/fixtures/comfyui_today_object_info.json and comfyui_textgen_object_info.json say "
        "which).",
        "",
        f"0.3.64 classes that declare today's interface instead of 0.3.64's ({len(changed)}): {', '.join(changed)} "
        "(the same fixtures say what changed: new options, today's sampler list, Save and Preview Image's IMAGE "
        "output).",
    ]
    if not TEMPLATES.is_file():
        return lines
    result = json.loads(TEMPLATES.read_text())
    lines += [
        "",
        f"**{result['complete_templates']} of the web UI's {result['local_templates']} local templates have "
        f"every node offered, {result['complete_usage_share']:.0%} of their recorded usage** "
        "(docs/benchmarks/templates.json, `python scripts/templates_coverage.py`).",
    ]
    shares = result.get("render_usage_share")
    if shares:
        lines += [
            "",
            f"**Rendered on the tiny demo files: {shares['image']:.1%} of the local image templates' usage, "
            f"{shares['video']:.1%} of the video templates'** ({shares['all']:.1%} of all local templates'): "
            "each node-complete template's own graph, converted by our UI converter with our tiny files of its "
            "family in place of its downloads, run in-process; `renders` and `render_error` per template in the "
            "same file. The render run takes tens of minutes, so CI checks only that the shares follow from "
            "the committed flags: `python scripts/templates_render.py <demo workspace>` reruns it.",
        ]
    lines += [
        "",
        "What the templates still lack, most used first (templates using it, their usage), by reason:",
        "",
    ]
    by_reason: dict[str, list[str]] = {}
    for row in result["missing_classes"]:
        by_reason.setdefault(reason(row["class"]), []).append(f"{row['class']} ({row['templates']}, {row['usage']})")
    for why, classes in by_reason.items():
        lines.append(f"- {why}: {', '.join(classes)}")
    return lines
