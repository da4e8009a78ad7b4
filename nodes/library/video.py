"""ComfyUI's video file nodes (`comfy_extras.nodes_video`): LoadVideo and SaveWEBM with the interface of
ComfyUI 0.10.0 (the same as 0.3.64's); SaveVideo, CreateVideo, GetVideoComponents and Trim Video ("Video
Slice") as today's ComfyUI declares them (category video).

VIDEO values are `nodes.media.video` objects. SaveVideo writes `<prefix>_<counter:05>_.<mp4|mkv|webm>` into
the output folder, passes the video on (today's VIDEO output) and answers ComfyUI's UI result for a video,
`{"images": [file], "animated": (True,)}`: the web UI shows a video player for it, fetching the file from /view.

Today's SaveVideo nests its choices: `format` (auto, mp4, mkv, webm) brings `format.codec` (auto, h264, av1;
webm: auto, av1), whose h264 and av1 bring an optional `format.codec.encoding` (auto, or re-encode with
`format.codec.encoding.crf`). A hidden optional top-level `codec` of the same shape takes the codec of older
prompts, which sent `format` and `codec` as two plain strings ("auto", "auto").
"""

from __future__ import annotations

import io
import mimetypes
import os
from fractions import Fraction
from typing import Any

import torch

from nodes import image_io, output_claims
from nodes.dynamic_inputs import DYNAMIC_COMBO, DynamicSection, combo_inputs
from nodes.image_io import annotated_path, save_image_path
from nodes.media import av  # imported when first used (nodes.media.LazyModule)
from nodes.media.audio import workflow_tags
from nodes.media.video import (
    COLOR_SPACES,
    VideoCodec,
    VideoComponents,
    VideoContainer,
    VideoFromComponents,
    VideoFromFile,
    VideoInput,
)
from nodes.output_claims import write_atomic
from nodes.workspace import active

MODULE = "comfy_extras.nodes_video"
CATEGORY = "image/video"  # LoadVideo and SaveWEBM, as 0.10.0 files them
TODAY_CATEGORY = "video"  # today's SaveVideo, CreateVideo, GetVideoComponents, Trim Video


def input_files(kinds: tuple[str, ...]) -> list[str]:
    """Sorted names of the input folder's files whose MIME major type is one of `kinds` ("video", "audio")."""
    folder = active().input_dir
    if not folder.is_dir():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and (mimetypes.guess_type(p.name, strict=False)[0] or "").split("/")[0] in kinds
    )


def check_video(video: Any, input_name: str = "video") -> VideoInput:
    if not isinstance(video, VideoInput):
        raise ValueError(f"{input_name}: expected a VIDEO value, got {type(video).__name__}")
    return video


def _choice(enum: type, value: str, input_name: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"{input_name}: {value!r} is not one of {', '.join(enum.as_input())}") from None


def _saved(file: str, subfolder: str) -> dict[str, Any]:
    return {"ui": {"images": [{"filename": file, "subfolder": subfolder, "type": "output"}], "animated": (True,)}}


def _claim_name(filename_prefix: str, width: int, height: int, extension: str) -> tuple[str, str, str]:
    """(folder, file name, subfolder) of the next output file for `filename_prefix` (claimed for this node)."""
    base = active().output_dir
    folder, stem, counter, subfolder, _ = save_image_path(filename_prefix, base, width, height)
    taken = output_claims.claim(folder, stem, counter)
    if taken.folder != folder:  # a dead run's claim, made under a prefix with time variables
        subfolder = os.path.relpath(taken.folder, os.path.abspath(base))
    return taken.folder, f"{taken.stem}_{taken.counter:05}_.{extension}", subfolder


# crf range and default of each codec's re-encode (today's ComfyUI: H.264 0..51 at 23, AV1 0..63 at 30)
CRF = {"h264": (23.0, 51.0), "av1": (30.0, 63.0)}
FORMAT_CODECS = {"auto": ("auto", "h264", "av1"), "mp4": ("auto", "h264", "av1"), "mkv": ("auto", "h264", "av1")}
FORMAT_CODECS["webm"] = ("auto", "av1")
ENCODINGS = ("auto", "re-encode")


def _option(key: str, required: dict | None = None, optional: dict | None = None) -> dict:
    return {"key": key, "inputs": {"required": required or {}, **({"optional": optional} if optional else {})}}


def _encoding(codec: str) -> tuple:
    default, top = CRF[codec]
    crf = ("FLOAT", {"default": default, "min": 0.0, "max": top, "step": 1.0, "tooltip": "Lower: better and larger."})
    return (
        DYNAMIC_COMBO,
        {
            "display_name": "encoding mode",
            "tooltip": "auto keeps a stream already in this codec; re-encode encodes at the quality (crf) given.",
            "options": [_option("auto"), _option("re-encode", {"crf": crf})],
        },
    )


def _codec_choice(codecs: tuple[str, ...], **extra: Any) -> tuple:
    """Today's SaveVideo codec input: auto, or a codec with its optional encoding mode."""
    options = [_option(c) if c == "auto" else _option(c, optional={"encoding": _encoding(c)}) for c in codecs]
    tooltip = "The video codec; auto keeps a stream the container holds, else H.264 (AV1 in WebM)."
    return (DYNAMIC_COMBO, {**extra, "tooltip": tooltip, "options": options})


def save_choices(format: str, codec: str | None, kwargs: dict[str, Any]) -> tuple[str, str, float | None]:
    """(container, codec, crf or None) of SaveVideo's inputs: the codec nested under `format` where the prompt
    has one, else the top-level `codec` of older prompts; names outside the options are refused by input."""
    if format not in FORMAT_CODECS:
        raise ValueError(f"format: {format!r} is not one of {', '.join(FORMAT_CODECS)}")
    nested = combo_inputs(kwargs, "format")
    if "codec" in nested:
        where, name, encoding = "format.codec", nested["codec"], combo_inputs(nested, "codec")
    else:
        where, name, encoding = "codec", codec or "auto", combo_inputs(kwargs, "codec")
    if name not in FORMAT_CODECS[format]:
        raise ValueError(f"{where}: {name!r} is not one of {', '.join(FORMAT_CODECS[format])} (format {format})")
    mode = encoding.get("encoding", "auto")
    if mode not in ENCODINGS:
        raise ValueError(f"{where}.encoding: {mode!r} is not one of {', '.join(ENCODINGS)}")
    crf = encoding.get("encoding.crf") if mode == "re-encode" else None
    if crf is not None:
        top = CRF.get(name, CRF["h264"])[1]  # codec auto re-encodes as H.264 outside WebM
        if not 0.0 <= float(crf) <= top:
            raise ValueError(f"{where}.encoding.crf: {crf} is outside 0..{top:g}")
        crf = float(crf)
    if format == "auto":  # as today's ComfyUI: AV1 goes into WebM, the rest into MP4
        format = "webm" if name == "av1" else "mp4"
    return format, name, crf


class SaveVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["export video"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "video": ("VIDEO", {"tooltip": "The video to save."}),
                    "filename_prefix": (
                        "STRING",
                        {
                            "default": "video/ComfyUI",
                            "multiline": False,
                            "tooltip": "Start of the file name; may hold a subfolder and variables such as "
                            "%date:yyyy-MM-dd%.",
                        },
                    ),
                    "format": (
                        DYNAMIC_COMBO,
                        {
                            "tooltip": "The file format (auto: MP4, or WebM for AV1).",
                            "options": [
                                _option(name, {"codec": _codec_choice(codecs)})
                                for name, codecs in FORMAT_CODECS.items()
                            ],
                        },
                    ),
                }
            ),
            # older prompts' codec, hidden in the web UI
            "optional": DynamicSection({"codec": _codec_choice(FORMAT_CODECS["mp4"], hidden=True)}),
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ("VIDEO",)
    RETURN_NAMES = ("video",)
    OUTPUT_TOOLTIPS = ("The input video, unchanged.",)
    FUNCTION = "save_video"
    OUTPUT_NODE = True
    CATEGORY = TODAY_CATEGORY
    DESCRIPTION = "Saves the video into the output folder (MP4, MKV or WebM), with the workflow in its tags."

    def save_video(
        self,
        video: VideoInput,
        filename_prefix: str = "video/ComfyUI",
        format: str = "auto",
        codec: str | None = None,
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
        **kwargs: Any,
    ):
        video = check_video(video)
        container, video_codec, crf = save_choices(format, codec, kwargs)
        width, height = video.get_dimensions()
        folder, file, subfolder = _claim_name(filename_prefix, width, height, VideoContainer.get_extension(container))
        metadata = None
        if image_io.metadata_enabled():
            metadata = {**(extra_pnginfo or {}), **({"prompt": prompt} if prompt is not None else {})} or None
        # whole or not at all under its name, as the image nodes write
        write_atomic(
            os.path.join(folder, file),
            lambda tmp: video.save_to(
                tmp, format=VideoContainer(container), codec=VideoCodec(video_codec), metadata=metadata, crf=crf
            ),
        )
        return {**_saved(file, subfolder), "result": (video,)}


class CreateVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["images to video"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The frames of the video."}),
                "fps": ("FLOAT", {"default": 30.0, "min": 1.0, "max": 120.0, "step": 1.0}),
            },
            "optional": {
                "audio": ("AUDIO", {"tooltip": "The sound of the video."}),
                "bit_depth": (
                    "COMBO",
                    {
                        "default": "auto",
                        "multiselect": False,
                        "options": ["auto", 8, 10],
                        "tooltip": "Bits per colour when encoded; auto: 8 for sRGB, 10 for HDR.",
                    },
                ),
                "color_space": (
                    "COMBO",
                    {
                        "default": "sRGB",
                        "multiselect": False,
                        "options": list(COLOR_SPACES),
                        "tooltip": "The colour space of the images: HDR is BT.2020 with HLG, HDR PQ BT.2020 with PQ.",
                    },
                ),
                "codec": (
                    "COMBO",
                    {
                        "default": "none",
                        "multiselect": False,
                        "advanced": True,
                        "options": ["none", *VideoCodec.as_input()],
                        "tooltip": "Encode the video at once (auto: H.264); none keeps the frames as they are.",
                    },
                ),
            },
        }

    RETURN_TYPES = ("VIDEO",)
    FUNCTION = "create_video"
    CATEGORY = TODAY_CATEGORY
    DESCRIPTION = "Makes a video of the images, one frame each, at the given frame rate, with optional audio."

    def create_video(
        self,
        images: torch.Tensor,
        fps: float,
        audio: dict | None = None,
        bit_depth: int | str = "auto",
        color_space: str = "sRGB",
        codec: str = "none",
    ):
        if color_space not in COLOR_SPACES:
            raise ValueError(f"color_space: {color_space!r} is not one of {', '.join(COLOR_SPACES)}")
        if bit_depth == "auto":
            bit_depth = 10 if color_space != "sRGB" else 8
        if str(bit_depth) not in ("8", "10"):
            raise ValueError(f"bit_depth: {bit_depth!r} is not one of auto, 8, 10")
        components = VideoComponents(images=images, frame_rate=Fraction(fps), audio=audio)
        video: VideoInput = VideoFromComponents(components, bit_depth=int(bit_depth), color_space=color_space)
        if codec != "none":
            # encoded now, into Matroska in memory (today's ComfyUI's one-video VideoFromList does so)
            buffer = io.BytesIO()
            video.save_to(buffer, format=VideoContainer.MKV, codec=_choice(VideoCodec, codec, "codec"))
            video = VideoFromFile(buffer)
        return (video,)


class GetVideoComponents:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["extract frames", "split video", "video to images", "demux"]

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"video": ("VIDEO", {"tooltip": "The video to take apart."})}}

    # bit_depth and color_space are combo outputs (ComfyUI lists a combo output's type as its options, none here)
    RETURN_TYPES = ("IMAGE", "AUDIO", "FLOAT", [], [])
    RETURN_NAMES = ("images", "audio", "fps", "bit_depth", "color_space")
    FUNCTION = "get_components"
    CATEGORY = TODAY_CATEGORY
    DESCRIPTION = "The video's frames, its audio (none without an audio track), frame rate, bit depth and colour space."

    def get_components(self, video: VideoInput):
        video = check_video(video)
        components = video.get_components()
        return (
            components.images,
            components.audio,
            float(components.frame_rate),
            video.get_bit_depth(),
            video.get_color_space(),
        )


class LoadVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["import video", "open video", "video file"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "file": ("COMBO", {"multiselect": False, "options": input_files(("video",)), "video_upload": True})
            }
        }

    RETURN_TYPES = ("VIDEO",)
    FUNCTION = "load_video"
    CATEGORY = CATEGORY
    DESCRIPTION = "A video file of the input folder (upload one with the button)."

    def load_video(self, file: str):
        return (VideoFromFile(str(annotated_path(file))),)

    @classmethod
    def IS_CHANGED(cls, file: str) -> float:
        # the modification time, as ComfyUI: hashing a large video on every prompt would cost more
        return os.path.getmtime(annotated_path(file))

    @classmethod
    def VALIDATE_INPUTS(cls, file: str) -> bool | str:
        try:
            ok = annotated_path(file).is_file()
        except ValueError:
            ok = False
        return True if ok else f"Invalid video file: {file}"


class VideoSlice:
    """Today's "Trim Video" (node id "Video Slice"), as the newest ComfyUI declares it."""

    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["trim video duration", "skip first frames", "frame load cap", "start time"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "video": ("VIDEO", {}),
                "start_time": (
                    "FLOAT",
                    {
                        "default": 0.0,
                        "min": -1e5,
                        "max": 1e5,
                        "step": 0.001,
                        "tooltip": "Start in seconds; negative counts from the end.",
                    },
                ),
                "duration": (
                    "FLOAT",
                    {
                        "default": 0.0,
                        "min": 0.0,
                        "step": 0.001,
                        "tooltip": "Length in seconds; 0 keeps the rest of the video.",
                    },
                ),
                "strict_duration": (
                    "BOOLEAN",
                    {"default": False, "tooltip": "Fail when the video is shorter than the duration asked for."},
                ),
            }
        }

    RETURN_TYPES = ("VIDEO",)
    FUNCTION = "slice"
    CATEGORY = TODAY_CATEGORY
    DESCRIPTION = "The part of the video (frames and audio) from start_time for duration seconds."

    def slice(self, video: VideoInput, start_time: float, duration: float, strict_duration: bool):
        trimmed = check_video(video).as_trimmed(start_time, duration, strict_duration=strict_duration)
        if trimmed is None:
            strict = " (strict duration)" if strict_duration else ""
            raise ValueError(
                f"Trim Video: from {start_time} s for {duration} s holds no part of this "
                f"{video.get_duration():.3f} s video{strict}"
            )
        return (trimmed,)


class SaveWEBM:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["export webm"]
    ENCODERS = {"vp9": "libvpx-vp9", "av1": "libsvtav1"}

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE",),
                "filename_prefix": ("STRING", {"default": "ComfyUI", "multiline": False}),
                "codec": ("COMBO", {"multiselect": False, "options": list(cls.ENCODERS)}),
                "fps": ("FLOAT", {"default": 24.0, "min": 0.01, "max": 1000.0, "step": 0.01}),
                "crf": (
                    "FLOAT",
                    {
                        "default": 32.0,
                        "min": 0,
                        "max": 63.0,
                        "step": 1,
                        "tooltip": "Higher is smaller and lower in quality.",
                    },
                ),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ()
    FUNCTION = "save_images"
    OUTPUT_NODE = True
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    DESCRIPTION = "Writes the images as a WebM video (VP9 or AV1) into the output folder."

    def save_images(
        self,
        images: torch.Tensor,
        codec: str,
        fps: float,
        filename_prefix: str,
        crf: float,
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
    ):
        encoder = self.ENCODERS.get(codec)
        if encoder is None:
            raise ValueError(f"codec: {codec!r} is not one of {', '.join(self.ENCODERS)}")
        folder, file, subfolder = _claim_name(filename_prefix, images.shape[2], images.shape[1], "webm")
        tags = workflow_tags(prompt, extra_pnginfo) if image_io.metadata_enabled() else {}

        def write(tmp: str) -> None:
            with av.open(tmp, mode="w", format="webm") as out:
                for key, value in tags.items():
                    out.metadata[key] = value
                stream = out.add_stream(encoder, rate=Fraction(round(fps * 1000), 1000))
                stream.width, stream.height = images.shape[2], images.shape[1]
                stream.pix_fmt = "yuv420p10le" if codec == "av1" else "yuv420p"
                stream.bit_rate = 0
                stream.options = {"crf": str(crf), **({"preset": "6"} if codec == "av1" else {})}
                for image in images:
                    pixels = (image[..., :3] * 255).clamp(0, 255).to(torch.uint8).cpu().numpy()
                    out.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
                out.mux(stream.encode(None))

        write_atomic(os.path.join(folder, file), write)
        return _saved(file, subfolder)


NODE_CLASS_MAPPINGS = {
    "SaveWEBM": SaveWEBM,
    "SaveVideo": SaveVideo,
    "CreateVideo": CreateVideo,
    "GetVideoComponents": GetVideoComponents,
    "LoadVideo": LoadVideo,
    "Video Slice": VideoSlice,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "SaveVideo": "Save Video",
    "CreateVideo": "Create Video",
    "GetVideoComponents": "Get Video Components",
    "LoadVideo": "Load Video",
    "Video Slice": "Trim Video",
}
