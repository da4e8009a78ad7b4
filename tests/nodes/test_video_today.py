"""Today's ComfyUI video nodes (comfy_extras/nodes_video.py, newest source): GetVideoComponents' bit_depth and
color_space outputs, CreateVideo's bit depth, colour space and codec, SaveVideo's VIDEO output and its nested
format / codec / encoding choices, through the web UI's widgets (ui_to_api), validation and a run; prompts of
0.3.64 / 0.10.0 (format and codec as two plain strings) still run; bad names are refused naming the input."""

from __future__ import annotations

import copy
import io
import uuid
from fractions import Fraction

import av
import numpy as np
import pytest
import torch

from nodes.library import video as video_nodes
from nodes.media.video import VideoComponents, VideoFromComponents, VideoFromFile


def _frames(count: int = 4, height: int = 48, width: int = 64) -> torch.Tensor:
    y = torch.linspace(0, 1, height)[:, None].expand(height, width)
    x = torch.linspace(0, 1, width)[None, :].expand(height, width)
    return torch.stack([torch.stack([x * (i + 1) / count, y, (x + y) / 2], dim=-1) for i in range(count)])


def _saved(ws, result: dict):
    [entry] = result["ui"]["images"]
    return ws.output_dir / entry["subfolder"] / entry["filename"]


@pytest.fixture
def ws(demo_workspace):
    return demo_workspace


def test_components_of_the_example_clip_say_8_bit_srgb(ws):
    (video,) = video_nodes.LoadVideo().load_video("example.mp4")
    images, audio, fps, bit_depth, color_space = video_nodes.GetVideoComponents().get_components(video)
    assert images.dim() == 4 and fps > 0
    # yuv444p, no transfer function tagged: 8 bits, sRGB (today's ComfyUI reads untagged video as sRGB)
    assert (bit_depth, color_space) == (8, "sRGB")


@pytest.mark.parametrize(
    "bit_depth, color_space, expected",
    [
        ("auto", "sRGB", (8, "sRGB")),
        ("auto", "HDR", (10, "HDR")),
        (8, "HDR PQ", (8, "HDR PQ")),
        (10, "sRGB", (10, "sRGB")),
    ],
)
def test_create_video_depth_and_colour_space_survive_a_save(ws, bit_depth, color_space, expected):
    (video,) = video_nodes.CreateVideo().create_video(_frames(), 8.0, None, bit_depth, color_space)
    assert video_nodes.GetVideoComponents().get_components(video)[3:] == expected
    result = video_nodes.SaveVideo().save_video(video, f"depth/{bit_depth}_{color_space}", "mkv")
    (loaded,) = video_nodes.LoadVideo().load_video(str(_saved(ws, result).relative_to(ws.output_dir)) + " [output]")
    images, _, fps, *rest = video_nodes.GetVideoComponents().get_components(loaded)
    assert tuple(rest) == expected and fps == 8.0 and images.shape == (4, 48, 64, 3)
    with av.open(str(_saved(ws, result))) as container:
        stream = container.streams.video[0]
        assert stream.format.name == ("yuv420p10le" if expected[0] == 10 else "yuv420p")
    if color_space == "sRGB":  # HDR pixels are meant for an HDR display: only sRGB decodes back to the frames
        assert (images - _frames()).abs().mean() < 3 / 255


def test_create_video_with_a_codec_encodes_at_once(ws):
    (video,) = video_nodes.CreateVideo().create_video(_frames(), 10.0, codec="av1")
    assert isinstance(video, VideoFromFile) and "matroska" in video.get_container_format()
    with av.open(video.get_stream_source()) as container:
        assert container.streams.video[0].codec.canonical_name == "av1"
    with pytest.raises(ValueError, match="color_space: 'P3' is not one of sRGB, HDR, HDR PQ"):
        video_nodes.CreateVideo().create_video(_frames(), 10.0, color_space="P3")
    with pytest.raises(ValueError, match="bit_depth: 12 is not one of auto, 8, 10"):
        video_nodes.CreateVideo().create_video(_frames(), 10.0, bit_depth=12)


def test_save_video_passes_the_video_on(ws):
    (video,) = video_nodes.CreateVideo().create_video(_frames(), 8.0)
    result = video_nodes.SaveVideo().save_video(video, "pass/on")
    assert result["result"] == (video,) and result["result"][0] is video
    assert result["ui"]["animated"] == (True,) and _saved(ws, result).suffix == ".mp4"


@pytest.mark.parametrize(
    "fmt, codec, extension, encoded",
    [("auto", "av1", ".webm", "av1"), ("mkv", "auto", ".mkv", "h264"), ("mp4", "av1", ".mp4", "av1")],
)
def test_format_and_codec_choose_the_file(ws, fmt, codec, extension, encoded):
    (video,) = video_nodes.CreateVideo().create_video(_frames(), 8.0)
    path = _saved(ws, video_nodes.SaveVideo().save_video(video, "choice/v", fmt, **{"format.codec": codec}))
    assert path.suffix == extension
    with av.open(str(path)) as container:
        assert container.streams.video[0].codec.canonical_name == encoded


def test_re_encode_takes_the_crf():
    nested = {"format.codec": "h264", "format.codec.encoding": "re-encode", "format.codec.encoding.crf": 40.0}
    assert video_nodes.save_choices("mkv", None, nested) == ("mkv", "h264", 40.0)
    # encoding auto keeps the encoder's default quality, whatever crf the widget still holds
    assert video_nodes.save_choices("mp4", None, {**nested, "format.codec.encoding": "auto"}) == ("mp4", "h264", None)
    # the older prompts' top-level codec, with its own nested encoding
    old = {"codec.encoding": "re-encode", "codec.encoding.crf": 12}
    assert video_nodes.save_choices("auto", "av1", old) == ("webm", "av1", 12.0)
    assert video_nodes.save_choices("auto", None, {}) == ("mp4", "auto", None)
    # the nested codec wins over the hidden top-level one, as today's ComfyUI's `format.get("codec") or codec`
    assert video_nodes.save_choices("auto", "h264", {"format.codec": "av1"}) == ("webm", "av1", None)
    frames = VideoFromComponents(VideoComponents(images=_frames(), frame_rate=Fraction(8)))
    small, large = io.BytesIO(), io.BytesIO()
    frames.save_to(small, "mp4", "h264", crf=45)
    frames.save_to(large, "mp4", "h264", crf=5)
    assert len(small.getvalue()) < len(large.getvalue())


def test_bad_choices_are_refused_naming_the_input():
    with pytest.raises(ValueError, match="format: 'avi' is not one of auto, mp4, mkv, webm"):
        video_nodes.save_choices("avi", None, {})
    with pytest.raises(ValueError, match=r"format.codec: 'h264' is not one of auto, av1 \(format webm\)"):
        video_nodes.save_choices("webm", None, {"format.codec": "h264"})
    with pytest.raises(ValueError, match="codec: 'hevc' is not one of auto, h264, av1"):
        video_nodes.save_choices("mp4", "hevc", {})
    with pytest.raises(ValueError, match="format.codec.encoding: 'fast' is not one of auto, re-encode"):
        video_nodes.save_choices("mp4", None, {"format.codec": "h264", "format.codec.encoding": "fast"})
    with pytest.raises(ValueError, match=r"format.codec.encoding.crf: 60 is outside 0..51"):
        video_nodes.save_choices(
            "mp4", None, {"format.codec": "h264", "format.codec.encoding": "re-encode", "format.codec.encoding.crf": 60}
        )


def _ui_workflow(save_widgets: list) -> dict:
    """LoadVideo -> GetVideoComponents -> CreateVideo (fps and audio linked) -> SaveVideo, as the Wan Animate 2
    templates wire them, with SaveVideo's saved widgets given."""
    return {
        "nodes": [
            {"id": 1, "type": "LoadVideo", "mode": 0, "inputs": [], "widgets_values": ["example.mp4", "image"]},
            {"id": 2, "type": "GetVideoComponents", "mode": 0, "inputs": [{"name": "video", "link": 1}]},
            {
                "id": 3,
                "type": "CreateVideo",
                "mode": 0,
                "inputs": [
                    {"name": "images", "link": 2},
                    {"name": "audio", "link": 3},
                    {"name": "fps", "widget": {"name": "fps"}, "link": 4},
                ],
                "widgets_values": [30, 8, "sRGB", "none"],
            },
            {
                "id": 4,
                "type": "SaveVideo",
                "mode": 0,
                "inputs": [{"name": "video", "link": 5}],
                "widgets_values": save_widgets,
            },
        ],
        "links": [
            [1, 1, 0, 2, 0, "VIDEO"],
            [2, 2, 0, 3, 0, "IMAGE"],
            [3, 2, 1, 3, 1, "AUDIO"],
            [4, 2, 2, 3, 2, "FLOAT"],
            [5, 3, 0, 4, 0, "VIDEO"],
        ],
    }


async def _run(ws, registry, prompt: dict) -> None:
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.validation import validate_prompt

    valid, error, outputs, node_errors = await validate_prompt(registry, "p", copy.deepcopy(prompt), None)
    assert (valid, error, node_errors) == (True, None, {})
    await run_prompt(prompt, None, registry, show_progress=False, all_outputs=True)


@pytest.fixture
def run_folder() -> str:
    """An output subfolder of this test's own (the demo workspace is shared by the session's tests)."""
    return f"video_today_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def registry(ws):
    from comfy_bridge.registry import build_registry

    return build_registry(ws, load_custom_nodes=False)


async def test_the_templates_save_video_widgets_become_nested_inputs_and_run(ws, registry, run_folder):
    from comfy_bridge.formats import ui_to_api

    # the Wan Animate 2 templates' Save Video: prefix, format, format.codec, the hidden codec
    prompt = ui_to_api(_ui_workflow([f"{run_folder}/t", "auto", "auto", "auto"]), registry)
    assert prompt["4"]["inputs"] == {
        "filename_prefix": f"{run_folder}/t",
        "format": "auto",
        "format.codec": "auto",
        "codec": "auto",
        "video": ["3", 0],
    }
    assert prompt["3"]["inputs"]["bit_depth"] == 8 and prompt["3"]["inputs"]["fps"] == ["2", 2]
    await _run(ws, registry, prompt)
    assert sorted(p.name for p in (ws.output_dir / run_folder).iterdir())[-1].endswith("_.mp4")
    # a nested re-encode: mkv, h264, encoding mode re-encode at crf 30, then the hidden codec
    prompt = ui_to_api(_ui_workflow([f"{run_folder}/r", "mkv", "h264", "re-encode", 30, "auto"]), registry)
    assert {k: v for k, v in prompt["4"]["inputs"].items() if k.startswith("format")} == {
        "format": "mkv",
        "format.codec": "h264",
        "format.codec.encoding": "re-encode",
        "format.codec.encoding.crf": 30,
    }
    await _run(ws, registry, prompt)
    [saved] = [p for p in (ws.output_dir / run_folder).iterdir() if p.name.startswith("r_")]
    assert saved.suffix == ".mkv"
    with av.open(str(saved)) as container:
        assert container.streams.video[0].codec.canonical_name == "h264"


@pytest.mark.parametrize("fmt, codec, suffix", [("auto", "auto", ".mp4"), ("mp4", "h264", ".mp4")])
async def test_older_api_prompts_still_run(ws, registry, run_folder, fmt, codec, suffix):
    """0.3.64 / 0.10.0 prompts send format and codec as two plain strings."""
    prefix = f"{run_folder}/{fmt}_{codec}"
    prompt = {
        "1": {"class_type": "LoadVideo", "inputs": {"file": "example.mp4"}},
        "2": {
            "class_type": "SaveVideo",
            "inputs": {"video": ["1", 0], "filename_prefix": prefix, "format": fmt, "codec": codec},
        },
    }
    await _run(ws, registry, prompt)
    [saved] = [p for p in (ws.output_dir / run_folder).iterdir() if p.name.startswith(f"{fmt}_{codec}_")]
    assert saved.suffix == suffix
    original = VideoFromFile(str(ws.input_dir / "example.mp4")).get_components().images
    assert np.array_equal(VideoFromFile(str(saved)).get_components().images.numpy(), original.numpy())  # copied


async def test_bit_depth_and_colour_space_outputs_feed_create_video(ws, registry, run_folder):
    """A combo output (its type is its options) links to a combo input, as today's ComfyUI validates it."""
    prompt = {
        "1": {"class_type": "LoadVideo", "inputs": {"file": "example.mp4"}},
        "2": {"class_type": "GetVideoComponents", "inputs": {"video": ["1", 0]}},
        "3": {
            "class_type": "CreateVideo",
            "inputs": {"images": ["2", 0], "fps": ["2", 2], "bit_depth": ["2", 3], "color_space": ["2", 4]},
        },
        "4": {
            "class_type": "SaveVideo",
            "inputs": {"video": ["3", 0], "filename_prefix": f"{run_folder}/v", "format": "auto"},
        },
    }
    await _run(ws, registry, prompt)
    [saved] = list((ws.output_dir / run_folder).iterdir())
    assert VideoFromFile(str(saved)).get_bit_depth() == 8
