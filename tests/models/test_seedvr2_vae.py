"""SeedVR2's causal video VAE (nodes/models/seedvr2_vae.py), loaded from the tiny demo file in the published layout
through VAELoader's path (detection, loader), encodes and decodes as today's ComfyUI's own module does on the same
file, within 1e-5 (tests/models/fixtures/comfyui_seedvr2_vae.json.xz, recorded by scripts/record_comfyui_seedvr2_vae.py
from comfy/ldm/seedvr/vae.py with comfy/sd.py's conventions): an image, a 9-frame video (ComfyUI's temporal slices
with their carried caches), VAEEncodeTiled / VAEDecodeTiled's spatial tiles blended with cosine ramps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.models.detect import probe
from nodes.models.loader import load_vae
from nodes.models.seedvr2_demo import VAE_FILE, build_demo_seedvr2
from tests.recorded_tensors import at_recorded, load_json, tensor

RECORDED = load_json(Path(__file__).parent / "fixtures" / "comfyui_seedvr2_vae.json.xz")


@pytest.fixture(scope="module")
def vae(tmp_path_factory):
    (path,) = build_demo_seedvr2(tmp_path_factory.mktemp("seedvr2"))
    info = probe(str(path))
    assert (info.arch, info.kind) == ("seedvr2", "vae")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_vae(ModelRef("vae", "", (str(path),), (file_digest(path),)))
    torch.set_num_threads(threads)


def test_the_demo_file_is_the_recorded_one(tmp_path):
    from scripts.comfyui_recording import sha256

    (path,) = build_demo_seedvr2(tmp_path)
    assert path.as_posix().endswith(VAE_FILE) and sha256(str(path)) == RECORDED["sha256"]


def _draw(case: dict, normal: bool) -> torch.Tensor:
    gen = torch.Generator().manual_seed(case["seed"])
    x = torch.randn(case["shape"], generator=gen) if normal else torch.rand(case["shape"], generator=gen)
    assert abs(float(x.double().sum()) - case["sum"]) < 1e-6  # the recorded input, drawn again
    return x


@pytest.mark.parametrize("case", RECORDED["encode"], ids=lambda c: c["name"])
def test_encode_matches_comfyui(vae, case):
    pixels = _draw(case, normal=False)
    latent = vae.encode(pixels) if case["tile"] is None else vae.encode_tiled(pixels, case["tile"], case["overlap"])
    expected = tensor(case["latent"])
    assert torch.allclose(at_recorded(latent, case["latent"]), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", RECORDED["decode"], ids=lambda c: c["name"])
def test_decode_matches_comfyui(vae, case):
    latent = _draw(case, normal=True)
    image = vae.decode(latent) if case["tile"] is None else vae.decode_tiled(latent, case["tile"], case["overlap"])
    expected = tensor(case["image"])
    assert torch.allclose(at_recorded(image, case["image"]), expected, atol=1e-5, rtol=0)


def test_tiling_changes_the_numbers_it_is_checked_on(vae):
    """The tiled cases span several tiles: untiled, they differ (so their comparison tests the blending)."""
    case = next(c for c in RECORDED["decode"] if c["tile"])
    latent = _draw(case, normal=True)
    assert (vae.decode(latent) - vae.decode_tiled(latent, case["tile"], case["overlap"])).abs().max() > 1e-3


def test_bad_latents_are_named(vae):
    with pytest.raises(ValueError, match=r"decodes \[batch, 16, frames, height, width\] latents"):
        vae.decode(torch.zeros(1, 4, 2, 4, 4))


def test_the_templates_files_map_to_the_tiny_ones():
    from scripts import templates_render

    asked = ["seedvr2_3b_int8_convrot.safetensors", "seedvr2_ema_vae_fp16.safetensors"]
    assert templates_render.demo_file(asked[1], asked) == Path(VAE_FILE).name
    assert templates_render.demo_file(asked[0], asked) == "seedvr2_3b_tiny.safetensors"
    assert templates_render.demo_file("seedvr2_7b_int8_convrot.safetensors", asked) == "seedvr2_7b_tiny.safetensors"


def test_the_tiled_nodes_modelfns_take_the_vaes_own_tiling(vae):
    """VAEEncodeTiled / VAEDecodeTiled's ModelFns hand tile and overlap to this VAE's spatial tiling (ComfyUI's
    handles_tiling), not to the image VAEs' three-tiling average."""
    from nodes.modelfns.vae import VAEDecodeFn, VAEEncodeFn, VAEParams

    case = next(c for c in RECORDED["decode"] if c["tile"])
    latent = _draw(case, normal=True)
    params = VAEParams(tile=case["tile"], overlap=case["overlap"])
    image = VAEDecodeFn().execute(vae, {"latent": latent}, params)["image"]
    assert torch.allclose(at_recorded(image, case["image"]), tensor(case["image"]), atol=1e-5, rtol=0)
    case = next(c for c in RECORDED["encode"] if c["tile"])
    params = VAEParams(tile=case["tile"], overlap=case["overlap"])
    out = VAEEncodeFn().execute(vae, {"pixels": _draw(case, normal=False)}, params)["latent"]
    assert torch.allclose(at_recorded(out, case["latent"]), tensor(case["latent"]), atol=1e-5, rtol=0)


def test_seedvr2_preprocess_clips_encode_as_their_frames(vae):
    """SeedVR2Preprocess hands the VAE 5-D clips [B,T,H,W,3] (ComfyUI's VAE takes each as a video)."""
    case = next(c for c in RECORDED["encode"] if c["name"] == "video")
    pixels = _draw(case, normal=False)
    assert torch.equal(vae.encode(pixels[None]), vae.encode(pixels))
