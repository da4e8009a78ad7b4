"""Wan-Move's nodes (nodes/library/wan_move.py) against the newest ComfyUI's comfy_extras/nodes_wanmove.py, run at
development time on ComfyUI 0.10.0 with the tiny Wan 2.1 VAE (scripts/record_comfyui_wanmove.py, fixture
tests/nodes/fixtures/comfyui_wanmove.json.xz): the generated, parsed and joined tracks, the drawn frames, and
WanMoveTrackToVideo's conds and latent."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from nodes.library.wan_move import (
    GenerateTracks,
    WanMoveConcatTrack,
    WanMoveTracksFromCoords,
    WanMoveTrackToVideo,
    WanMoveVisualizeTracks,
    move_features,
)
from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import load_json, pixels, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wanmove.json.xz")
ATOL = 1e-5  # the same float32 VAE in two implementations


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


def generate(name: str) -> tuple[dict, int]:
    """The recorder's GenerateTracks case `name` ("masked" shows frames 3 to 8)."""
    inputs = dict(FIXTURE["inputs"]["generate"][name])
    if name == "masked":
        inputs["track_mask"] = torch.zeros(17, 6, 5)
        inputs["track_mask"][3:9, 2, 1] = 1.0
    return GenerateTracks().execute(**inputs)


def blocky(seed: int, frames: int) -> torch.Tensor:
    return seeded(seed, frames, 12, 16, 3).repeat_interleave(8, 1).repeat_interleave(8, 2)


def move_tracks() -> dict:
    """The recorder's five tracks that never share a latent cell (one hidden at first, one leaving the picture)."""
    frames = torch.arange(13, dtype=torch.float32)[:, None]
    starts = torch.tensor([[4.0, 5.0], [20.0, 40.0], [60.0, 3.0], [33.0, 22.0], [50.0, 45.0]])
    speed = torch.tensor([[3.0, 0.5], [1.5, -2.0], [-3.5, 1.0], [0.25, 0.25], [1.0, -0.5]])
    visible = torch.ones(13, 5, dtype=torch.bool)
    visible[0, 3] = False
    visible[8, 1] = False
    return {"track_path": starts[None] + frames[..., None] * speed[None], "track_visibility": visible}


def assert_tracks(ours: dict, theirs: dict) -> None:
    assert sorted(ours) == sorted(theirs)
    for key, value in ours.items():
        assert str(value.dtype) == theirs[key]["dtype"], key
        torch.testing.assert_close(value.float(), tensor(theirs[key]), atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", list(FIXTURE["tracks"]["generate"]))
def test_generated_tracks_equal_comfyui(name: str) -> None:
    tracks, length = generate(name)
    rec = FIXTURE["tracks"]["generate"][name]
    assert length == rec["length"]
    assert_tracks(tracks, rec["tracks"])


def test_tracks_from_coords_equal_comfyui() -> None:
    coords, rec = FIXTURE["inputs"]["coords"], FIXTURE["tracks"]["coords"]
    mask = (seeded(3, 3, 4, 4) > 0.7).float()
    for name, inputs in {
        "two": {"track_coords": coords["two"]},
        "one": {"track_coords": coords["one"]},
        "one_masked": {"track_coords": coords["one"], "track_mask": torch.cat([mask, mask[:1] * 0])},
    }.items():
        tracks, length = WanMoveTracksFromCoords().execute(**inputs)
        assert length == rec[name]["length"]
        assert_tracks(tracks, rec[name]["tracks"])


def test_concat_equals_comfyui() -> None:
    first, second = generate("linear")[0], generate("ease_out")[0]
    assert_tracks(WanMoveConcatTrack().execute(first, second)[0], FIXTURE["tracks"]["concat"]["both"])
    assert WanMoveConcatTrack().execute(first)[0] is first


@pytest.mark.parametrize("name", list(FIXTURE["tracks"]["visualize"]))
def test_drawn_tracks_equal_comfyui(name: str) -> None:
    visual = dict(line_resolution=5, circle_size=9, opacity=0.9, line_width=6)
    images, tracks = {
        "still": (blocky(5, 1), generate("linear")[0]),
        "clip_curved": (blocky(6, 17), generate("ease_in_out_bezier")[0]),
        "masked_defaults": (blocky(7, 17), generate("masked")[0]),
    }[name]
    if name == "masked_defaults":
        visual = dict(line_resolution=24, circle_size=12, opacity=0.75, line_width=16)
    (drawn,) = WanMoveVisualizeTracks().execute(images, tracks=tracks, **visual)
    ours = (drawn * 255).round().to(torch.uint8).numpy()
    theirs = pixels(FIXTURE["tracks"]["visualize"][name])
    assert ours.shape == theirs.shape == (17, 96, 128, 3)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    assert not np.array_equal(ours, (images.repeat(17 // images.shape[0], 1, 1, 1) * 255).to(torch.uint8).numpy())
    assert WanMoveVisualizeTracks().execute(images, **visual)[0] is images


def test_overlapping_tracks_keep_the_later_tracks_blend() -> None:
    latent = seeded(1, 2, 3, 4, 4)
    cells = [[(0, 0), (1, 1), (2, 2)], [(3, 3), (1, 1), (-1, -1)]]
    out = move_features(latent, cells, 0.5)
    assert torch.equal(out[:, 1, 1, 1], latent[:, 1, 1, 1] + (latent[:, 0, 3, 3] - latent[:, 1, 1, 1]) * 0.5)
    assert torch.equal(out[:, 2, 2, 2], latent[:, 2, 2, 2] + (latent[:, 0, 0, 0] - latent[:, 2, 2, 2]) * 0.5)
    out[:, 1, 1, 1], out[:, 2, 2, 2] = latent[:, 1, 1, 1], latent[:, 2, 2, 2]
    assert torch.equal(out, latent)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from nodes.models.wan_demo import build_demo_wan

    ws_iter = active_workspace(tmp_path_factory.mktemp("wanmove"), build_demo_wan)
    ws = next(ws_iter)
    for path, digest in FIXTURE["sha256"].items():
        assert hashlib.sha256((ws.models_dir / path).read_bytes()).hexdigest() == digest, f"{path}: re-record"
    yield ws
    next(ws_iter, None)


def test_track_to_video_equals_comfyui(workspace, fixed_threads) -> None:
    (vae,) = asyncio.run(call_node("VAELoader", vae_name="wan_2.1_vae_tiny.safetensors"))
    text = [[torch.zeros(1, 5, 8), {"pooled_output": None}]]
    start = seeded(11, 2, 40, 56, 3)
    cases = {
        "strength1": dict(strength=1.0, start_image=start[:1], tracks=move_tracks()),
        "strength035": dict(strength=0.35, start_image=start[:1], tracks=move_tracks()),
        "strength0": dict(strength=0.0, start_image=start[:1], tracks=move_tracks()),
        "two_frames": dict(strength=1.0, start_image=start, tracks=move_tracks()),
        "no_tracks": dict(strength=1.0, start_image=start[:1]),
    }
    images = {}
    for name, case in cases.items():
        rec = FIXTURE["track_to_video"][name]
        pos, neg, latent = asyncio.run(
            WanMoveTrackToVideo().execute(text, text, vae, width=64, height=48, length=13, batch_size=1, **case)
        )
        for ours, theirs in ((pos, rec["positive"]), (neg, rec["negative"])):
            ((_, opts),) = ours
            (expected,) = theirs
            assert sorted(k for k in opts if k != "pooled_output") == sorted(expected)
            for key in expected:
                assert opts[key].shape == tuple(expected[key]["shape"])
                torch.testing.assert_close(opts[key], tensor(expected[key]), atol=ATOL, rtol=0)
        assert torch.equal(latent["samples"], tensor(rec["latent"]))
        images[name] = pos[0][1]["concat_latent_image"]
    assert not torch.equal(images["strength1"], images["no_tracks"])  # the tracks moved something
    assert torch.equal(images["strength0"], images["no_tracks"])
