"""SeedVR2's files (issues 38 and 39), told apart by the newest ComfyUI's rules (comfy/model_detection.py's 7B and 3B
keys, comfy/sd.py's VAE key), bare or in ComfyUI's diffusion_model layout, are detected as SeedVR2's (its transformers
as diffusion models nodes/models/seedvr2_model.py loads, its VAE as its own) rather than taken for another family or
an unknown architecture."""

from __future__ import annotations

import pytest

from nodes.models.detect import classify

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
def test_seedvr2_transformers_are_its_diffusion_models(prefix: str, key: str, shape: tuple, part: str) -> None:
    from nodes.models.detect import seedvr2_part

    shapes = {f"{prefix}vid_in.proj.weight": (shape[1], 132), f"{prefix}{key}": shape}
    info = classify(shapes, "seedvr2_ema.safetensors")
    assert (info.arch, info.kind, info.prefix) == ("seedvr2", "diffusion_model", prefix)
    assert seedvr2_part(shapes) == part


def test_the_seedvr2_vae_is_its_own_family_not_an_sd_vae() -> None:
    """comfy/sd.py's key names the VAE (nodes/models/seedvr2_vae.py loads it), before the SD VAE rule."""
    shapes = {
        **{k: (128, 3, 3, 3, 3) if k.startswith("encoder") else (3, 128, 3, 3, 3) for k in SD_VAE},
        "decoder.up_blocks.2.upsamplers.0.upscale_conv.weight": (1024, 256, 1, 1, 1),
    }
    info = classify(shapes, "ema_vae_fp16.safetensors")
    assert (info.arch, info.kind) == ("seedvr2", "vae")


def test_a_narrower_separate_mlp_file_is_not_taken_for_seedvr2_7b() -> None:
    """ComfyUI's 7B rule for separate MLPs also asks for the 3072 width."""
    from nodes.models.detect import seedvr2_part

    assert seedvr2_part({"blocks.35.mlp.vid.proj_out.weight": (2048, 8192)}) is None
    assert seedvr2_part(SD_VAE) is None
