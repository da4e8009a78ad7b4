"""AUDIO values and audio files: decoding any file PyAV reads into a float waveform, and writing
FLAC, MP3 and Opus files with the workflow in the container's tags, as ComfyUI's audio nodes do.

An AUDIO value is `{"waveform": tensor [B, C, T] float32 in -1..1, "sample_rate": int}`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from nodes.media import av  # imported when first used (nodes.media.LazyModule)

# Sample rates libopus accepts; other rates are resampled up to the next one (48 kHz at most).
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
# (PyAV container format, encoder) per file format ComfyUI's save nodes write.
ENCODERS = {"flac": ("flac", "flac"), "mp3": ("mp3", "libmp3lame"), "opus": ("opus", "libopus")}
# Bit rates of the quality choices; MP3's "V0" is the encoder's best variable-rate quality instead.
BIT_RATES = {"64k": 64000, "96k": 96000, "128k": 128000, "192k": 192000, "320k": 320000}
# Full scale of each integer sample format, to bring samples into -1..1.
_INT_SCALE = {np.dtype(np.int16): 2.0**15, np.dtype(np.int32): 2.0**31, np.dtype(np.uint8): None}


def audio_value(waveform: torch.Tensor, sample_rate: int) -> dict[str, Any]:
    """An AUDIO value; `waveform` [C, T] or [B, C, T]."""
    if waveform.dim() == 2:
        waveform = waveform.unsqueeze(0)
    if waveform.dim() != 3:
        raise ValueError(f"an audio waveform is [batch, channels, samples]; got shape {tuple(waveform.shape)}")
    return {"waveform": waveform, "sample_rate": int(sample_rate)}


def check_audio(audio: Any, input_name: str = "audio") -> tuple[torch.Tensor, int]:
    """(waveform [B, C, T], sample rate) of an AUDIO input, or a ValueError naming what is wrong with it."""
    if audio is None:
        raise ValueError(f"{input_name}: no audio (a video without an audio track gives none)")
    if not isinstance(audio, dict) or "waveform" not in audio or "sample_rate" not in audio:
        raise ValueError(
            f"{input_name}: expected an AUDIO value (a dict with 'waveform' and 'sample_rate'), "
            f"got {type(audio).__name__}"
        )
    waveform = audio["waveform"]
    if not isinstance(waveform, torch.Tensor) or waveform.dim() != 3:
        raise ValueError(f"{input_name}: the waveform must be a [batch, channels, samples] tensor")
    return waveform, int(audio["sample_rate"])


def frame_samples(frame: av.AudioFrame) -> np.ndarray:
    """One decoded frame as float32 [C, T] in -1..1, whatever its sample format (planar or packed)."""
    data = frame.to_ndarray()
    channels = len(frame.layout.channels)
    if not frame.format.is_planar:  # packed: one row of interleaved samples
        data = data.reshape(-1, channels).T
    if data.dtype == np.uint8:  # unsigned 8-bit is centred on 128
        return (data.astype(np.float32) - 128.0) / 128.0
    scale = _INT_SCALE.get(data.dtype)
    return data.astype(np.float32) / np.float32(scale) if scale else data.astype(np.float32)


def decode_stream(container: av.container.InputContainer, stream: av.AudioStream) -> tuple[torch.Tensor, int]:
    """Every sample of an audio stream of an open container: (waveform [C, T] float32, sample rate)."""
    chunks = [frame_samples(frame) for frame in container.decode(stream)]
    if not chunks:
        raise ValueError("the audio stream holds no samples")
    return torch.from_numpy(np.concatenate(chunks, axis=1)), int(stream.codec_context.sample_rate)


def load_audio(source: str | Path | BinaryIO) -> dict[str, Any]:
    """The first audio stream of a file (audio or video) as an AUDIO value with a batch of one."""
    with av.open(source if not isinstance(source, Path) else str(source)) as container:
        if not container.streams.audio:
            raise ValueError(f"{_name(source)} has no audio stream")
        waveform, rate = decode_stream(container, container.streams.audio[0])
    return audio_value(waveform, rate)


def _name(source: Any) -> str:
    return Path(source).name if isinstance(source, (str, Path)) else "the file"


def _layout(channels: int, fmt: str) -> str:
    if fmt == "mp3" and channels > 2:
        raise ValueError(f"MP3 holds one or two channels; this audio has {channels}")
    return {1: "mono", 2: "stereo"}.get(channels, f"{channels}c")


def opus_rate(rate: int) -> int:
    """The rate an Opus file is written at: `rate` if libopus takes it, else the next one up (at most 48 kHz)."""
    return next((r for r in OPUS_RATES if r >= rate), OPUS_RATES[-1])


def encode_audio(
    waveform: torch.Tensor,
    sample_rate: int,
    dest: str | Path | BinaryIO,
    fmt: str = "flac",
    quality: str = "128k",
    metadata: dict[str, str] | None = None,
) -> None:
    """Write one waveform [C, T] as a `fmt` file ("flac", "mp3", "opus") with `metadata` as container tags.

    FLAC stores 16-bit samples, as ComfyUI's does (values are rounded to 1/32768). Opus takes only its own
    rates: other rates are resampled by FFmpeg's resampler on the way in."""
    if fmt not in ENCODERS:
        raise ValueError(f"unknown audio format {fmt!r}; expected one of {', '.join(ENCODERS)}")
    container_format, encoder = ENCODERS[fmt]
    channels = int(waveform.shape[0])
    layout = _layout(channels, fmt)
    rate = opus_rate(sample_rate) if fmt == "opus" else sample_rate
    with av.open(str(dest) if isinstance(dest, Path) else dest, mode="w", format=container_format) as out:
        for key, value in (metadata or {}).items():
            out.metadata[key] = value
        stream = out.add_stream(encoder, rate=rate, layout=layout)
        if fmt == "mp3" and quality == "V0":
            stream.codec_context.qscale = 1  # variable bit rate at the best quality
        elif fmt != "flac" and quality in BIT_RATES:
            stream.bit_rate = BIT_RATES[quality]
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(waveform.detach().float().cpu().numpy()), format="fltp", layout=layout
        )
        frame.sample_rate = sample_rate
        frame.pts = 0
        # PyAV's encoder converts format, rate and frame size to what the codec takes before encoding.
        out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


def workflow_tags(prompt: Any, extra_pnginfo: dict | None) -> dict[str, str]:
    """ComfyUI's container tags: "prompt" and each extra_pnginfo key (usually "workflow"), as JSON."""
    tags = {} if prompt is None else {"prompt": json.dumps(prompt)}
    tags.update({key: json.dumps(value) for key, value in (extra_pnginfo or {}).items()})
    return tags


def encode_to_bytes(
    waveform: torch.Tensor, sample_rate: int, fmt: str, quality: str = "128k", metadata: dict[str, str] | None = None
) -> bytes:
    """`encode_audio` into memory (the caller writes the file whole, under its final name)."""
    buffer = io.BytesIO()
    encode_audio(waveform, sample_rate, buffer, fmt, quality, metadata)
    return buffer.getvalue()


def resample(waveform: torch.Tensor, rate: int, target: int) -> torch.Tensor:
    """A waveform [..., C, T] at `target` samples per second, with FFmpeg's resampler (no torchaudio)."""
    if rate == target:
        return waveform
    channels = waveform.shape[-2]
    layout = {1: "mono", 2: "stereo"}.get(channels, f"{channels}c")
    flat = waveform.reshape(-1, channels, waveform.shape[-1]).detach().float().cpu().numpy()
    out = []
    for item in flat:
        resampler = av.AudioResampler(format="fltp", layout=layout, rate=target)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(item), format="fltp", layout=layout)
        frame.sample_rate, frame.pts = rate, 0
        chunks = [f.to_ndarray() for f in resampler.resample(frame)] + [
            f.to_ndarray() for f in resampler.resample(None)
        ]
        out.append(np.concatenate(chunks, axis=1))
    return torch.from_numpy(np.stack(out)).reshape(*waveform.shape[:-1], -1)
