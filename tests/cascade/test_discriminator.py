"""The EfficientNet-style discriminator learns real vs generated, and survives a safetensors round trip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nodes.models.discriminator import (
    DEMO_CONFIG,
    Discriminator,
    MBConv,
    build_demo_discriminator,
    load_discriminator,
    save_discriminator,
    synthetic_images,
    train_discriminator,
)

REPO = Path(__file__).resolve().parents[2]


def test_network_is_built_from_mbconv_blocks_with_squeeze_excite():
    model = Discriminator(DEMO_CONFIG)
    blocks = [m for m in model.modules() if isinstance(m, MBConv)]
    assert len(blocks) == sum(s[2] for s in DEMO_CONFIG.stages)
    assert any(b.residual for b in blocks) and all(hasattr(b, "se") for b in blocks)
    assert model(torch.rand(3, 40, 40, 3)).shape == (3, 2)


def test_training_lowers_loss_and_separates_the_classes(fixed_threads):
    torch.manual_seed(0)
    model = Discriminator(DEMO_CONFIG)
    real, fake = synthetic_images(16, 32, 0.0, 1), synthetic_images(16, 32, 0.4, 2)
    losses = train_discriminator(model, real, fake, epochs=5, batch_size=8, seed=0)
    assert losses[-1] < 0.5 * losses[0]
    test_real, test_fake = synthetic_images(8, 32, 0.0, 11), synthetic_images(8, 32, 0.4, 12)
    assert float(model.confidence(test_real).min()) > float(model.confidence(test_fake).max())


def test_safetensors_round_trip_gives_identical_confidences(tmp_path):
    torch.manual_seed(1)
    model = Discriminator(DEMO_CONFIG).eval()
    images = torch.rand(4, 32, 32, 3)
    path = save_discriminator(model, tmp_path / "d.safetensors")
    again = load_discriminator(path)
    assert again.config == model.config
    assert torch.equal(again.confidence(images), model.confidence(images))


def test_loading_a_file_without_config_is_refused(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(tmp_path / "x.safetensors"))
    with pytest.raises(ValueError, match="not a discriminator"):
        load_discriminator(tmp_path / "x.safetensors")


def test_demo_discriminator_is_deterministic(tmp_path, fixed_threads):
    a = build_demo_discriminator(tmp_path / "a.safetensors")
    b = build_demo_discriminator(tmp_path / "b.safetensors")
    assert a.read_bytes() == b.read_bytes()


def _write_pngs(folder: Path, images: torch.Tensor) -> None:
    folder.mkdir(parents=True)
    for i, im in enumerate(images):
        Image.fromarray((im.numpy() * 255).round().astype(np.uint8)).save(folder / f"{i}.png")


def test_train_command_writes_a_loadable_file(tmp_path):
    _write_pngs(tmp_path / "real", synthetic_images(8, 48, 0.0, 5))
    _write_pngs(tmp_path / "fake", synthetic_images(8, 48, 0.5, 6))
    out = tmp_path / "trained.safetensors"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "comfy_bridge.cli",
            "discriminator",
            "train",
            "--real",
            str(tmp_path / "real"),
            "--fake",
            str(tmp_path / "fake"),
            "--out",
            str(out),
            "--epochs",
            "3",
            "--image-size",
            "32",
            "--batch-size",
            "8",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "8 real and 8 generated" in proc.stdout and "epoch   3" in proc.stdout
    assert load_discriminator(out).config.image_size == 32
