"""The recorded-fixture comparison accepts what float32 rounding on another CPU explains, and nothing more."""

from __future__ import annotations

import hashlib

import numpy as np

from tests.nodes import comfyui_fixtures as cf


def _latent(values: np.ndarray) -> dict:
    arr = np.ascontiguousarray(values.astype(np.float32))
    return {
        "shape": list(arr.shape),
        "sha256": hashlib.sha256(arr.tobytes()).hexdigest(),
        "values": arr.reshape(-1).tolist(),
    }


def _image(pixels: np.ndarray) -> dict:
    arr = np.ascontiguousarray(pixels.astype(np.uint8))
    return {
        "shape": list(arr.shape),
        "mode": "RGB",
        "sha256": hashlib.sha256(arr.tobytes()).hexdigest(),
        "pixels": arr.tolist(),
    }


def test_latents_a_few_ulps_apart_match():
    rng = np.random.default_rng(0)
    expected = rng.standard_normal((1, 4, 8, 8)).astype(np.float32) * 3
    nudged = expected.copy()
    for _ in range(3):  # three roundings' worth, as AVX2 against AVX-512 gives
        nudged = np.nextafter(nudged, np.float32(np.inf))
    assert not np.array_equal(expected, nudged)
    assert cf._compare_latent("l", _latent(expected), _latent(nudged)) == []


def test_latents_that_really_differ_do_not_match():
    rng = np.random.default_rng(1)
    expected = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    off = expected.copy()
    off[0, 0, 0, 0] += 1e-4  # far beyond rounding at magnitude ~3
    assert cf._compare_latent("l", _latent(expected), _latent(off))


def test_a_few_pixels_one_level_apart_match_but_not_more():
    rng = np.random.default_rng(2)
    expected = rng.integers(1, 254, (16, 16, 3))
    flipped = expected.copy()
    flipped[0, 0, 0] += 1
    flipped[3, 5, 2] -= 1
    assert cf._compare_image("i", _image(expected), _image(flipped)) == []
    two_levels = expected.copy()
    two_levels[0, 0, 0] += 2
    assert cf._compare_image("i", _image(expected), _image(two_levels))
    systematic = expected + (rng.random(expected.shape) < 0.5)  # a rounding rule that differs: half the pixels
    assert cf._compare_image("i", _image(expected), _image(systematic))
