"""The inputs ComfyUI's video conditioning nodes declare alike (WanImageToVideo and its kin in the Wan,
HunyuanVideo and Kandinsky 5 families): the two conditionings, the VAE, and the video's size, length and batch."""

from __future__ import annotations

from nodes import MAX_RESOLUTION


def video_size(default: int, step: int = 16) -> tuple:
    """A width or height input: a multiple of `step` pixels."""
    return ("INT", {"default": default, "min": step, "max": MAX_RESOLUTION, "step": step})


def video_length(default: int) -> tuple:
    """A length input in frames, stepping by 4 (a video latent frame holds four frames after the first)."""
    return ("INT", {"default": default, "min": 1, "max": MAX_RESOLUTION, "step": 4})


def batch_input() -> tuple:
    """A batch_size input: videos made at once."""
    return ("INT", {"default": 1, "min": 1, "max": 4096})


def video_inputs(width: int = 832, height: int = 480, length: int = 81) -> dict:
    """positive, negative, vae, width, height, length and batch_size with these defaults."""
    return {
        "positive": ("CONDITIONING", {}),
        "negative": ("CONDITIONING", {}),
        "vae": ("VAE", {}),
        "width": video_size(width),
        "height": video_size(height),
        "length": video_length(length),
        "batch_size": batch_input(),
    }
