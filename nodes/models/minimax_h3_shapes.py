"""MiniMax H3's latent arithmetic, as today's ComfyUI nodes (comfy_extras MiniMax H3 nodes) compute it: the
video VAE encodes 17k+5 frames at 24 fps into 5k+2 latent frames of 1/16 the canvas with 24 channels; the
stereo audio latent runs at 40 latents a second with 32 channels; canvases keep a 768 short edge, at most
768x1344 pixels, both sides rounded to 32."""

from __future__ import annotations

import math

FPS = 24
AUDIO_LATENTS_PER_SECOND = 40
FRAMES_PER_CHUNK, LATENTS_PER_CHUNK = 17, 5
VIDEO_CHANNELS, AUDIO_CHANNELS, AUDIO_STEREO = 24, 32, 2
SPATIAL_RATIO = 16
CANVAS_MULTIPLE, SHORT_EDGE, MAX_PIXELS = 32, 768, 768 * 1344
# The model-sampling keys MiniMaxH3SigmaShift sets, the video and the audio shift; the denoise step hands them to
# each evaluation's cond (as ComfyUI's model reads them from its transformer options); 12 and 3 without them.
MINIMAX_SHIFTS = ("minimax_shift_video", "minimax_shift_audio")


def align_frame_count(length: int) -> int:
    """The frame count the VAE can encode: at least 5, snapped up to the next 17k+5."""
    n = max(LATENTS_PER_CHUNK, int(length))
    return n + (LATENTS_PER_CHUNK - n) % FRAMES_PER_CHUNK


def video_latent_frames(frame_count: int) -> int:
    """Latent frames of an aligned frame count: 5k+2 for 17k+5 (the first chunk keeps 2)."""
    if frame_count % FRAMES_PER_CHUNK != LATENTS_PER_CHUNK:
        raise ValueError(f"MiniMax H3 frame counts are 17k+5, got {frame_count}")
    return (frame_count - LATENTS_PER_CHUNK) // FRAMES_PER_CHUNK * LATENTS_PER_CHUNK + 2


def temporal_shape(length: int) -> tuple[int, int, int]:
    """(aligned frame count, video latent frames, audio latents) for a requested length in frames."""
    frames = align_frame_count(length)
    return frames, video_latent_frames(frames), round(frames / FPS * AUDIO_LATENTS_PER_SECOND)


# The video frames each latent frame stands for, cycling (the first latent frame of a clip: one frame); ComfyUI's
# MiniMaxH3AV latent format sizes the silent audio of an empty video latent from them.
FRAMES_PER_LATENT = (1, 4, 4, 4, 4)


def silent_audio_shape(video_shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The audio latent's shape for an empty [B,C,T,H,W] video latent: 40 latents a second of its frames' duration
    (one latent frame, an image: 2)."""
    frames = sum(FRAMES_PER_LATENT[i % len(FRAMES_PER_LATENT)] for i in range(video_shape[2]))
    return (video_shape[0], AUDIO_CHANNELS, AUDIO_STEREO, round(frames * AUDIO_LATENTS_PER_SECOND / FPS))


def av_latent_shapes(
    width: int, height: int, length: int, batch_size: int = 1
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The empty video and audio latents' shapes for a canvas and a length."""
    _, latent_t, audio_t = temporal_shape(length)
    return (
        (batch_size, VIDEO_CHANNELS, latent_t, height // SPATIAL_RATIO, width // SPATIAL_RATIO),
        (batch_size, AUDIO_CHANNELS, AUDIO_STEREO, audio_t),
    )


def adapt_canvas(width: float, height: float) -> tuple[int, int]:
    """(width, height) of the canvas for an aspect: short edge 768, area capped at 768x1344, sides to 32."""
    if width <= 0 or height <= 0:
        raise ValueError(f"MiniMax H3 needs a positive width and height, got {width}x{height}")
    ratio = width / height
    w, h = (SHORT_EDGE * ratio, float(SHORT_EDGE)) if ratio >= 1.0 else (float(SHORT_EDGE), SHORT_EDGE / ratio)
    if w * h > MAX_PIXELS:
        scale = math.sqrt(MAX_PIXELS / (w * h))
        w, h = w * scale, h * scale
    return (
        max(CANVAS_MULTIPLE, round(w / CANVAS_MULTIPLE) * CANVAS_MULTIPLE),
        max(CANVAS_MULTIPLE, round(h / CANVAS_MULTIPLE) * CANVAS_MULTIPLE),
    )
