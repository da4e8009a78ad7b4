"""SeedVR2's transformer and VAE (issues 38 and 39) do not run here yet: its files, told apart by the newest ComfyUI's
rules (comfy/model_detection.py's 7B and 3B keys, comfy/sd.py's VAE key), bare or in ComfyUI's diffusion_model
layout, are refused by name rather than taken for another family or an unknown architecture."""

from __future__ import annotations

import pytest

from nodes.models.detect import classify
from nodes.models.errors import ModelLoadError

SD_VAE = {"encoder.conv_in.weight": (128, 3, 3, 3), "decoder.conv_out.weight": (3, 128, 3, 3)}


@pytest.mark.parametrize("prefix", ["", "model.diffusion_model."])
@pytest.mark.parametrize(
    ("key", "shape", "part"),
    [
        ("blocks.35.mlp.vid.proj_out.weight", (3072, 12288), "7B transformer"),
        ("blocks.35.mlp.all.proj_in_gate.weight", (8192, 3072), "7B transformer"),
        ("blocks.31.mlp.all.proj_in_gate.weight", (6912, 2560), "3B transformer"),
    ],
)
def test_seedvr2_transformers_are_refused_by_name(prefix: str, key: str, shape: tuple, part: str) -> None:
    shapes = {f"{prefix}vid_in.proj.weight": (shape[1], 132), f"{prefix}{key}": shape}
    with pytest.raises(ModelLoadError, match=f"is SeedVR2's {part}, which is not supported yet"):
        classify(shapes, "seedvr2_ema.safetensors")


def test_seedvr2_vae_is_refused_by_name_not_taken_for_an_sd_vae() -> None:
    shapes = {
        **{k: (128, 3, 3, 3, 3) if k.startswith("encoder") else (3, 128, 3, 3, 3) for k in SD_VAE},
        "decoder.up_blocks.2.upsamplers.0.upscale_conv.weight": (1024, 256, 1, 1, 1),
    }
    with pytest.raises(ModelLoadError, match="is SeedVR2's VAE, which is not supported yet"):
        classify(shapes, "ema_vae_fp16.safetensors")


def test_a_narrower_separate_mlp_file_is_not_taken_for_seedvr2_7b() -> None:
    """ComfyUI's 7B rule for separate MLPs also asks for the 3072 width."""
    from nodes.models.detect import seedvr2_part

    assert seedvr2_part({"blocks.35.mlp.vid.proj_out.weight": (2048, 8192)}) is None
    assert seedvr2_part(SD_VAE) is None
