"""VIDEO values: a video file (`VideoFromFile`) or frames in memory (`VideoFromComponents`), both
`VideoInput`s with ComfyUI's interface (get_components, save_to, get_dimensions, get_duration, ...),
which node packs use through `comfy_api` (Input.Video, InputImpl.VideoFromFile, Types.VideoComponents).

Saving writes MP4 (or, as today's ComfyUI, Matroska or WebM) with H.264 or AV1 video, 8- or 10-bit, and AAC
audio (Opus in WebM), the workflow in the container's tags; a file whose streams the chosen container holds as
they are (MP4: H.264, HEVC, AV1; AAC, MP3, Opus) is copied stream by stream instead of being encoded again,
unless a quality (crf), bit depth or colour space is asked for.

Colour: frames made of tensors are sRGB unless said otherwise; "HDR" (BT.2020 with HLG) and "HDR PQ"
(BT.2020 with PQ) are encoded with the BT.2020 matrix and tagged so, as today's ComfyUI does. sRGB frames
keep the conversion this project has always used (untagged, FFmpeg's default matrix); today's ComfyUI tags
them BT.709 and converts with that matrix, so an sRGB file of ours decodes to slightly other pixels there.
"""

from __future__ import annotations

import io
import json
import math
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any, BinaryIO

import numpy as np
import torch

from nodes.media import av  # imported when first used (nodes.media.LazyModule)
from nodes.media.audio import check_audio, decode_stream


class VideoContainer(str, Enum):
    """The file formats a video is saved as ("auto": MP4, or WebM for AV1 where a node picks)."""

    AUTO = "auto"
    MP4 = "mp4"
    MKV = "mkv"
    WEBM = "webm"

    @classmethod
    def as_input(cls) -> list[str]:
        return [member.value for member in cls]

    @classmethod
    def get_extension(cls, value: str | VideoContainer) -> str:
        value = cls(value)  # an unknown name is a ValueError here, before a file is named after it
        return "mp4" if value is cls.AUTO else value.value


class VideoCodec(str, Enum):
    """The video codecs a video is saved with ("auto" keeps a file's own, else H.264; AV1 in WebM)."""

    AUTO = "auto"
    H264 = "h264"
    AV1 = "av1"

    @classmethod
    def as_input(cls) -> list[str]:
        return [member.value for member in cls]


# The colour spaces a VIDEO value may be in (today's ComfyUI's names) and the transfer function of each.
COLOR_SPACES = ("sRGB", "HDR", "HDR PQ")
HDR_TRANSFERS = {"HDR": "ARIB_STD_B67", "HDR PQ": "SMPTE2084"}  # av.video.reformatter.ColorTrc names
BT2020_NCL = 9  # FFmpeg's AVColorSpace for the BT.2020 non-constant-luminance matrix
# A stream's transfer function -> the colour space a loaded video reports (others, untagged included: sRGB)
TRANSFER_COLOR_SPACES = {"BT709": "sRGB", "IEC61966_2_1": "sRGB", "ARIB_STD_B67": "HDR", "SMPTE2084": "HDR PQ"}
FFMPEG_CONTAINERS = {VideoContainer.MP4: "mp4", VideoContainer.MKV: "matroska", VideoContainer.WEBM: "webm"}
ENCODERS = {VideoCodec.H264: "h264", VideoCodec.AV1: "libsvtav1"}
# The streams WebM holds as they are; anything else is encoded again (AV1 video, Opus audio).
WEBM_CODECS = {"video": ("av1", "vp8", "vp9"), "audio": ("opus", "vorbis")}


def check_color_space(color_space: str) -> str:
    if color_space not in COLOR_SPACES:
        raise ValueError(f"color_space: {color_space!r} is not one of {', '.join(COLOR_SPACES)}")
    return color_space


def output_config(
    path: str | BinaryIO, format: VideoContainer | str, codec: VideoCodec | str
) -> tuple[VideoContainer, VideoCodec]:
    """The container and codec a save writes: "auto" container from the file name's extension (.mkv,
    .webm; else MP4), "auto" codec AV1 in WebM and H.264 elsewhere; WebM takes AV1 only."""
    format, codec = VideoContainer(format), VideoCodec(codec)
    if format is VideoContainer.AUTO:
        extension = os.path.splitext(os.fspath(path))[1].lower() if isinstance(path, (str, os.PathLike)) else ""
        format = {".mkv": VideoContainer.MKV, ".webm": VideoContainer.WEBM}.get(extension, VideoContainer.MP4)
    if codec is VideoCodec.AUTO:
        codec = VideoCodec.AV1 if format is VideoContainer.WEBM else VideoCodec.H264
    if format is VideoContainer.WEBM and codec is not VideoCodec.AV1:
        raise ValueError(f"a WebM video needs the av1 codec, not {codec.value}")
    return format, codec


def stream_bit_depth(stream: Any) -> int:
    """Bits per component of a video stream's pixel format (8 where it says none)."""
    components = stream.format.components if stream is not None and stream.format is not None else ()
    return max((c.bits for c in components), default=8)


def stream_color_space(stream: Any) -> str | None:
    """The colour space a stream's transfer function names, None when it names none we know."""
    trc = getattr(stream, "color_trc", None) if stream is not None else None
    try:
        name = av.video.reformatter.ColorTrc(trc).name
    except ValueError:
        return None
    return TRANSFER_COLOR_SPACES.get(name)


@dataclass
class VideoComponents:
    """A video's content: frames IMAGE [F, H, W, C] in 0..1, frame rate, optional AUDIO, container tags."""

    images: torch.Tensor
    frame_rate: Fraction
    audio: dict | None = None
    metadata: dict | None = None


class VideoInput(ABC):
    """A VIDEO value. Subclasses give the components and saving; the rest has defaults over them."""

    @abstractmethod
    def get_components(self) -> VideoComponents:
        """Frames, frame rate and audio, decoded into tensors."""

    @abstractmethod
    def save_to(
        self,
        path: str | BinaryIO,
        format: VideoContainer | str = VideoContainer.AUTO,
        codec: VideoCodec | str = VideoCodec.AUTO,
        metadata: dict | None = None,
        bit_depth: int | None = None,
        crf: float | None = None,
        color_space: str | None = None,
        preset: str | None = None,
    ) -> None:
        """Write the video as a file (a path or a writable binary buffer). None keeps the video's own bit
        depth and colour space and the encoder's default quality (crf) and speed (preset, H.264 only)."""

    def get_stream_source(self) -> str | io.BytesIO:
        """Something `av.open` reads: the file itself where there is one, else the video saved in memory."""
        buffer = io.BytesIO()
        self.save_to(buffer)
        buffer.seek(0)
        return buffer

    def get_dimensions(self) -> tuple[int, int]:
        """(width, height) of the frames."""
        images = self.get_components().images
        return int(images.shape[2]), int(images.shape[1])

    def get_duration(self) -> float:
        """Length in seconds."""
        components = self.get_components()
        return float(components.images.shape[0] / components.frame_rate)

    def get_frame_count(self) -> int:
        return int(self.get_components().images.shape[0])

    def get_frame_rate(self) -> Fraction:
        return self.get_components().frame_rate

    def get_container_format(self) -> str:
        """FFmpeg's name for the container ("mov,mp4,m4a,3gp,3g2,mj2" for MP4)."""
        with av.open(self.get_stream_source(), mode="r") as container:
            return container.format.name

    def get_bit_depth(self) -> int:
        """Bits per colour channel (8 unless the video says otherwise)."""
        return 8

    def get_color_space(self) -> str:
        """sRGB, HDR or HDR PQ; "auto" where the video does not say (today's ComfyUI's default)."""
        return "auto"

    def _encoding(self) -> dict[str, Any]:
        """The bit depth and colour space a video derived from this one (trimmed, cropped) keeps."""
        color_space = self.get_color_space()
        return {
            "bit_depth": self.get_bit_depth(),
            "color_space": color_space if color_space in COLOR_SPACES else "sRGB",
        }

    def as_trimmed(
        self, start_time: float | None = None, duration: float | None = None, strict_duration: bool = False
    ) -> VideoInput | None:
        """The frames (and audio) from `start_time` seconds (negative: from the end) for `duration` seconds
        (0 or None: to the end); None when that holds no frame, or, with `strict_duration`, fewer seconds than
        asked for."""
        c = self.get_components()
        total, rate = int(c.images.shape[0]), c.frame_rate
        start = round((start_time or 0.0) * rate)
        start = max(0, total + start) if start < 0 else start
        end = total if not duration else start + round(duration * rate)
        if strict_duration and end > total or start >= min(end, total):
            return None
        end = min(end, total)
        audio = c.audio
        if audio is not None:
            per_frame = audio["sample_rate"] / rate
            audio = {**audio, "waveform": audio["waveform"][..., round(start * per_frame) : round(end * per_frame)]}
        return VideoFromComponents(
            VideoComponents(images=c.images[start:end], frame_rate=rate, audio=audio, metadata=c.metadata),
            **self._encoding(),
        )

    def as_cropped(self, x: int = 0, y: int = 0, width: int = 0, height: int = 0) -> VideoInput:
        """The frames cut to the rectangle (clamped to the frame, even-aligned for H.264); an empty or whole
        rectangle gives the video itself."""
        c = self.get_components()
        frame_h, frame_w = int(c.images.shape[1]), int(c.images.shape[2])
        x0, y0 = max(0, min(x, frame_w)) // 2 * 2, max(0, min(y, frame_h)) // 2 * 2
        w = min(width or frame_w - x0, frame_w - x0) // 2 * 2
        h = min(height or frame_h - y0, frame_h - y0) // 2 * 2
        if w <= 0 or h <= 0 or (x0, y0, w, h) == (0, 0, frame_w, frame_h):
            return self
        return VideoFromComponents(
            VideoComponents(
                images=c.images[:, y0 : y0 + h, x0 : x0 + w].clone(),
                frame_rate=c.frame_rate,
                audio=c.audio,
                metadata=c.metadata,
            ),
            **self._encoding(),
        )


def _first_video_stream(container: Any, name: str) -> av.VideoStream:
    if not container.streams.video:
        raise ValueError(f"{name} has no video stream")
    return container.streams.video[0]


class VideoFromFile(VideoInput):
    """A video file: a path, or a binary buffer holding the file's bytes."""

    def __init__(self, file: str | os.PathLike | io.BytesIO) -> None:
        self._file = file if isinstance(file, io.BytesIO) else os.fspath(file)

    def _name(self) -> str:
        return f"video file {os.path.basename(self._file)!r}" if isinstance(self._file, str) else "the video"

    def _open(self) -> Any:
        if isinstance(self._file, io.BytesIO):
            self._file.seek(0)
        try:
            return av.open(self._file, mode="r")
        except (av.error.FFmpegError, OSError) as e:
            raise ValueError(f"{self._name()} cannot be read as a video: {e}") from e

    def get_stream_source(self) -> str | io.BytesIO:
        if isinstance(self._file, io.BytesIO):
            self._file.seek(0)
        return self._file

    def get_dimensions(self) -> tuple[int, int]:
        with self._open() as container:
            stream = _first_video_stream(container, self._name())
            return stream.width, stream.height

    def get_frame_rate(self) -> Fraction:
        with self._open() as container:
            rate = _first_video_stream(container, self._name()).average_rate
            return Fraction(rate) if rate else Fraction(1)

    def get_frame_count(self) -> int:
        with self._open() as container:
            stream = _first_video_stream(container, self._name())
            if stream.frames:
                return int(stream.frames)
            # no count in the header (some WebM, MKV): count the frames, decoding one at a time
            return sum(1 for _ in container.decode(stream))

    def get_duration(self) -> float:
        with self._open() as container:
            if container.duration is not None:
                return float(container.duration / av.time_base)
            stream = _first_video_stream(container, self._name())
            rate = stream.average_rate or 1
        return float(self.get_frame_count() / rate)

    def get_container_format(self) -> str:
        with self._open() as container:
            return container.format.name

    def get_bit_depth(self) -> int:
        """The bits per component of the file's pixel format (10 for yuv420p10le)."""
        with self._open() as container:
            return stream_bit_depth(container.streams.video[0] if container.streams.video else None)

    def get_color_space(self) -> str:
        """HDR or HDR PQ where the stream's transfer function says so, else sRGB."""
        with self._open() as container:
            return stream_color_space(container.streams.video[0] if container.streams.video else None) or "sRGB"

    def get_components(self) -> VideoComponents:
        with self._open() as container:
            stream = _first_video_stream(container, self._name())
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
            rate = Fraction(stream.average_rate) if stream.average_rate else Fraction(1)
            metadata = dict(container.metadata)
        if frames:
            images = torch.from_numpy(np.stack(frames)).float() / 255.0
        else:
            images = torch.zeros(0, stream.height, stream.width, 3)
        return VideoComponents(images=images, frame_rate=rate, audio=self._audio(), metadata=metadata)

    def _audio(self) -> dict | None:
        with self._open() as container:  # a second pass: demuxing the video consumed the audio packets
            if not container.streams.audio:
                return None
            try:
                waveform, rate = decode_stream(container, container.streams.audio[0])
            except ValueError:  # an audio stream without samples
                return None
        return {"waveform": waveform.unsqueeze(0), "sample_rate": rate}

    def save_to(
        self,
        path: str | BinaryIO,
        format: VideoContainer | str = VideoContainer.AUTO,
        codec: VideoCodec | str = VideoCodec.AUTO,
        metadata: dict | None = None,
        bit_depth: int | None = None,
        crf: float | None = None,
        color_space: str | None = None,
        preset: str | None = None,
    ) -> None:
        if color_space is not None:
            check_color_space(color_space)
        container, video_codec = output_config(path, format, codec)
        with self._open() as source:
            stream = source.streams.video[0] if source.streams.video else None
            own_space = stream_color_space(stream)
            if own_space is not None and color_space is not None and own_space != color_space:
                raise ValueError(f"a {own_space} video cannot be saved as {color_space} without a colour conversion")
            unchanged = crf is None and color_space is None and bit_depth in (None, stream_bit_depth(stream))
            if unchanged and _copyable(source, container, VideoCodec(codec)):
                _remux(source, path, FFMPEG_CONTAINERS[container], metadata)
                return
        # decoded frames are 8-bit RGB; a 10-bit source is encoded at 10 bits again unless told otherwise
        frames = VideoFromComponents(self.get_components(), **self._encoding())
        frames.save_to(path, container, video_codec, metadata, bit_depth, crf, color_space, preset)

    def __reduce__(self) -> tuple:
        # Sent to an executor (a pack node's input): the file's bytes go along, as a tensor on the data plane,
        # so an executor on a machine without the head's input folder reads the same video.
        if isinstance(self._file, io.BytesIO):
            data = self._file.getvalue()
        else:
            with open(self._file, "rb") as f:
                data = f.read()
        content = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.zeros(0, dtype=torch.uint8)
        return _video_file, (self._file if isinstance(self._file, str) else None, content)


def _video_file(path: str | None, content: torch.Tensor) -> VideoFromFile:
    """A VideoFromFile again: the same path where this machine has that file, else the bytes in memory."""
    if path is not None and os.path.isfile(path) and os.path.getsize(path) == content.numel():
        return VideoFromFile(path)
    return VideoFromFile(io.BytesIO(content.numpy().tobytes()))


# Codecs whose packets an MP4 file holds as they are; a video of other codecs (VP8/VP9 WebM, ProRes, ...)
# is decoded and encoded again as H.264, so that the saved file plays where MP4 does.
MP4_VIDEO_CODECS = ("h264", "hevc", "av1", "mpeg4")
MP4_AUDIO_CODECS = ("aac", "mp3", "mp3float", "alac", "opus")


def _copyable(source: Any, container: VideoContainer, codec: VideoCodec) -> bool:
    """Whether saving `source` into `container` with `codec` ("auto": any the container holds) may copy its
    packets instead of encoding its frames."""
    if not source.streams.video:
        return False
    video_codec = source.streams.video[0].codec.canonical_name
    if container is VideoContainer.WEBM:
        video_ok, audio_ok = WEBM_CODECS["video"], WEBM_CODECS["audio"]
    else:  # Matroska holds what MP4 does (and more; those are encoded again, as for MP4)
        video_ok, audio_ok = MP4_VIDEO_CODECS, MP4_AUDIO_CODECS
    wanted = video_codec in video_ok if codec is VideoCodec.AUTO else video_codec == codec.value
    return wanted and all(s.codec.canonical_name in audio_ok for s in source.streams.audio)


def _tags(metadata: dict | None) -> dict[str, str]:
    # ComfyUI stores each metadata value as JSON (strings too); keys follow the container's rules
    return {key: json.dumps(value) for key, value in (metadata or {}).items()}


def _open_output(path: str | BinaryIO, fmt: str) -> Any:
    # MP4 keeps free-form tags (prompt, workflow) only with use_metadata_tags
    options = {"movflags": "use_metadata_tags"} if fmt == "mp4" else {}
    return av.open(path, mode="w", format=fmt, options=options)


def _remux(source: Any, path: str | BinaryIO, fmt: str, metadata: dict | None) -> None:
    """Copy the video and audio streams of `source` into a new file, packets unchanged, with new tags."""
    with _open_output(path, fmt) as out:
        for key, value in source.metadata.items():
            if key not in (metadata or {}):
                out.metadata[key] = value
        for key, value in _tags(metadata).items():
            out.metadata[key] = value
        streams = {
            s: out.add_stream_from_template(template=s, opaque=True)
            for s in source.streams
            if s.type in ("video", "audio")
        }
        for packet in source.demux(*streams):
            if packet.dts is None:  # the demuxer's end-of-stream marker
                continue
            packet.stream = streams[packet.stream]
            out.mux(packet)


class VideoFromComponents(VideoInput):
    """A video made of frames in memory (CreateVideo's): IMAGE frames, a frame rate and optional audio, with the
    bit depth it is encoded at and the colour space its pixels are in (today's ComfyUI's CreateVideo choices)."""

    def __init__(self, components: VideoComponents, bit_depth: int = 8, color_space: str = "sRGB") -> None:
        self._components = components
        self._bit_depth = int(bit_depth)
        self._color_space = check_color_space(color_space)

    def get_components(self) -> VideoComponents:
        c = self._components
        return VideoComponents(images=c.images, frame_rate=c.frame_rate, audio=c.audio, metadata=c.metadata)

    def get_dimensions(self) -> tuple[int, int]:
        return int(self._components.images.shape[2]), int(self._components.images.shape[1])

    def get_bit_depth(self) -> int:
        return self._bit_depth

    def get_color_space(self) -> str:
        return self._color_space

    def save_to(
        self,
        path: str | BinaryIO,
        format: VideoContainer | str = VideoContainer.AUTO,
        codec: VideoCodec | str = VideoCodec.AUTO,
        metadata: dict | None = None,
        bit_depth: int | None = None,
        crf: float | None = None,
        color_space: str | None = None,
        preset: str | None = None,
    ) -> None:
        container, video_codec = output_config(path, format, codec)  # unknown names are ValueErrors
        color_space = check_color_space(color_space or self._color_space)
        ten_bit = (self._bit_depth if bit_depth is None else bit_depth) >= 10
        images = self._components.images
        if images.dim() != 4 or images.shape[0] == 0 or images.shape[-1] not in (3, 4):
            raise ValueError(f"a video needs frames [frames, height, width, 3]; got shape {tuple(images.shape)}")
        height, width = int(images.shape[1]), int(images.shape[2])
        if width % 2 or height % 2:
            raise ValueError(
                f"{video_codec.value} video (4:2:0) needs an even width and height; the frames are {width}x{height}"
            )
        # the rate in thousandths, as ComfyUI writes it (30000/1001 stays exact enough, 29.97 fps)
        rate = Fraction(round(self._components.frame_rate * 1000), 1000)
        if rate <= 0:
            raise ValueError(f"the frame rate must be positive; got {float(self._components.frame_rate)}")
        pix_fmt = "yuv420p10le" if ten_bit else "yuv420p"
        with _open_output(path, FFMPEG_CONTAINERS[container]) as out:
            for key, value in _tags(metadata).items():
                out.metadata[key] = value
            video = out.add_stream(ENCODERS[video_codec], rate=rate)
            video.width, video.height, video.pix_fmt = width, height, pix_fmt
            video.options = _encoder_options(video_codec, crf, preset)
            if color_space in HDR_TRANSFERS:
                _tag_hdr(video.codec_context, color_space)
            sound = _AudioTrack(out, self._components.audio, container) if self._components.audio else None
            for image in images:
                out.mux(video.encode(_frame(image, pix_fmt, color_space)))
            out.mux(video.encode(None))
            if sound is not None:
                # no longer than the frames: the audio of the video's own duration
                sound.write(math.ceil(sound.source_rate / rate * images.shape[0]))


def _encoder_options(codec: VideoCodec, crf: float | None, preset: str | None) -> dict[str, str]:
    options: dict[str, str] = {}
    if codec is VideoCodec.H264:
        # No rate-control lookahead (which mb-tree needs): with it libx264 now and then encodes the same
        # frames into other bytes, even on one thread, and a video decoded with other pixels run to run.
        options["x264-params"] = "rc-lookahead=0"
        if preset is not None:
            options["preset"] = preset
    if crf is not None:
        # SVT-AV1 has no crf 0; lossless is its own switch (as today's ComfyUI asks for it)
        options.update({"svtav1-params": "lossless=1"} if codec is VideoCodec.AV1 and crf == 0 else {"crf": str(crf)})
    return options


def _tag_hdr(target: Any, color_space: str) -> None:
    """BT.2020 primaries and matrix, HLG or PQ transfer, limited range: what an HDR player reads."""
    reformatter = av.video.reformatter
    target.color_primaries = reformatter.ColorPrimaries.BT2020
    target.color_trc = reformatter.ColorTrc[HDR_TRANSFERS[color_space]]
    target.colorspace = BT2020_NCL
    target.color_range = reformatter.ColorRange.MPEG


def _frame(image: torch.Tensor, pix_fmt: str, color_space: str) -> Any:
    """One IMAGE frame as an encoder's YUV frame: 8-bit RGB, or 16-bit RGB for 10-bit video (keeping the float
    precision); HDR frames through the BT.2020 matrix."""
    if pix_fmt == "yuv420p":
        pixels = (image[..., :3] * 255).clamp(0, 255).to(torch.uint8).cpu().numpy()
        frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
    else:
        pixels = (image[..., :3].float() * 65535).clamp(0, 65535).cpu().numpy().astype(np.uint16)
        frame = av.VideoFrame.from_ndarray(pixels, format="rgb48le")
    if color_space not in HDR_TRANSFERS:
        return frame.reformat(format=pix_fmt)
    frame = frame.reformat(format=pix_fmt, dst_colorspace=av.video.reformatter.Colorspace.BT2020)
    _tag_hdr(frame, color_space)
    return frame


class _AudioTrack:
    """A video file's audio stream: AAC at the sound's own rate, or Opus at 48 kHz in WebM."""

    def __init__(self, out: Any, audio: dict, container: VideoContainer) -> None:
        self.waveform, self.source_rate = check_audio(audio, "the video's audio")
        channels = self.waveform.shape[1]
        self.layout = {1: "mono", 2: "stereo"}.get(channels, f"{channels}c")
        webm = container is VideoContainer.WEBM
        self.out = out
        self.stream = out.add_stream(
            "libopus" if webm else "aac", rate=48000 if webm else self.source_rate, layout=self.layout
        )
        self.resampler = av.AudioResampler(format="fltp", layout=self.layout, rate=48000) if webm else None

    def write(self, samples: int) -> None:
        track = np.ascontiguousarray(self.waveform[0, :, :samples].float().cpu().numpy())
        frame = av.AudioFrame.from_ndarray(track, format="fltp", layout=self.stream.layout.name)
        frame.sample_rate = self.source_rate
        frame.pts = 0
        frames = (
            [frame] if self.resampler is None else [*self.resampler.resample(frame), *self.resampler.resample(None)]
        )
        for piece in frames:
            self.out.mux(self.stream.encode(piece))
        self.out.mux(self.stream.encode(None))
