"""VIDEO values: a video file (`VideoFromFile`) or frames in memory (`VideoFromComponents`), both
`VideoInput`s with ComfyUI's interface (get_components, save_to, get_dimensions, get_duration, ...),
which node packs use through `comfy_api` (Input.Video, InputImpl.VideoFromFile, Types.VideoComponents).

Saving writes MP4 with H.264 (yuv420p) video and AAC audio, the workflow in the container's tags; a file
whose streams an MP4 holds as they are (H.264, HEVC, AV1; AAC, MP3, Opus) is copied stream by stream
instead of being encoded again.
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
    """The file formats a video is saved as ("auto" picks MP4)."""

    AUTO = "auto"
    MP4 = "mp4"

    @classmethod
    def as_input(cls) -> list[str]:
        return [member.value for member in cls]

    @classmethod
    def get_extension(cls, value: str | VideoContainer) -> str:
        cls(value)  # an unknown name is a ValueError here, before a file is named after it
        return "mp4"


class VideoCodec(str, Enum):
    """The video codecs a video is saved with ("auto" keeps a file's own, else H.264)."""

    AUTO = "auto"
    H264 = "h264"

    @classmethod
    def as_input(cls) -> list[str]:
        return [member.value for member in cls]


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
    ) -> None:
        """Write the video as a file (a path or a writable binary buffer)."""

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
        """Bits per colour channel: frames are read and written as 8-bit."""
        return 8

    def get_color_space(self) -> str:
        return "sRGB"

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
            VideoComponents(images=c.images[start:end], frame_rate=rate, audio=audio, metadata=c.metadata)
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
            )
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
    ) -> None:
        format, codec = VideoContainer(format), VideoCodec(codec)
        with self._open() as source:
            if _copyable(source, codec):
                _remux(source, path, "mp4", metadata)
                return
        VideoFromComponents(self.get_components()).save_to(path, format, codec, metadata)

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


def _copyable(source: Any, codec: VideoCodec) -> bool:
    """Whether saving `source` as MP4 with `codec` may copy its packets instead of encoding its frames."""
    if not source.streams.video:
        return False
    video_codec = source.streams.video[0].codec_context.name
    wanted = video_codec in MP4_VIDEO_CODECS if codec is VideoCodec.AUTO else video_codec == codec.value
    return wanted and all(s.codec_context.name in MP4_AUDIO_CODECS for s in source.streams.audio)


def _tags(metadata: dict | None) -> dict[str, str]:
    # ComfyUI stores each metadata value as JSON (strings too); keys follow the container's rules
    return {key: json.dumps(value) for key, value in (metadata or {}).items()}


def _open_output(path: str | BinaryIO, fmt: str) -> Any:
    # MP4 keeps free-form tags (prompt, workflow) only with use_metadata_tags
    return av.open(path, mode="w", format=fmt, options={"movflags": "use_metadata_tags"})


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
    """A video made of frames in memory (CreateVideo's): IMAGE frames, a frame rate and optional audio."""

    def __init__(self, components: VideoComponents) -> None:
        self._components = components

    def get_components(self) -> VideoComponents:
        c = self._components
        return VideoComponents(images=c.images, frame_rate=c.frame_rate, audio=c.audio, metadata=c.metadata)

    def get_dimensions(self) -> tuple[int, int]:
        return int(self._components.images.shape[2]), int(self._components.images.shape[1])

    def save_to(
        self,
        path: str | BinaryIO,
        format: VideoContainer | str = VideoContainer.AUTO,
        codec: VideoCodec | str = VideoCodec.AUTO,
        metadata: dict | None = None,
    ) -> None:
        VideoContainer(format), VideoCodec(codec)  # unknown names are ValueErrors
        images = self._components.images
        if images.dim() != 4 or images.shape[0] == 0 or images.shape[-1] not in (3, 4):
            raise ValueError(f"a video needs frames [frames, height, width, 3]; got shape {tuple(images.shape)}")
        height, width = int(images.shape[1]), int(images.shape[2])
        if width % 2 or height % 2:
            raise ValueError(f"H.264 video (yuv420p) needs an even width and height; the frames are {width}x{height}")
        # the rate in thousandths, as ComfyUI writes it (30000/1001 stays exact enough, 29.97 fps)
        rate = Fraction(round(self._components.frame_rate * 1000), 1000)
        if rate <= 0:
            raise ValueError(f"the frame rate must be positive; got {float(self._components.frame_rate)}")
        audio = self._components.audio
        with _open_output(path, "mp4") as out:
            for key, value in _tags(metadata).items():
                out.metadata[key] = value
            video = out.add_stream("h264", rate=rate)
            video.width, video.height, video.pix_fmt = width, height, "yuv420p"
            # No rate-control lookahead (which mb-tree needs): with it libx264 now and then encodes the same
            # frames into other bytes, even on one thread, and a video decoded with other pixels run to run.
            video.options = {"x264-params": "rc-lookahead=0"}
            sound = None
            if audio is not None:
                waveform, sample_rate = check_audio(audio, "the video's audio")
                sound = out.add_stream(
                    "aac",
                    rate=sample_rate,
                    layout={1: "mono", 2: "stereo"}.get(waveform.shape[1], f"{waveform.shape[1]}c"),
                )
            for image in images:
                pixels = (image[..., :3] * 255).clamp(0, 255).to(torch.uint8).cpu().numpy()
                frame = av.VideoFrame.from_ndarray(pixels, format="rgb24").reformat(format="yuv420p")
                out.mux(video.encode(frame))
            out.mux(video.encode(None))
            if sound is not None:
                # no longer than the frames: the audio of the video's own duration
                samples = math.ceil(sample_rate / rate * images.shape[0])
                track = np.ascontiguousarray(waveform[0, :, :samples].float().cpu().numpy())
                frame = av.AudioFrame.from_ndarray(track, format="fltp", layout=sound.layout.name)
                frame.sample_rate = sample_rate
                frame.pts = 0
                out.mux(sound.encode(frame))
                out.mux(sound.encode(None))
