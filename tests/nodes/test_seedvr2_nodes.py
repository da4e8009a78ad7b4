"""SeedVR2's image and latent nodes (nodes/library/seedvr2.py, nodes/seedvr2_color.py) give what today's ComfyUI's
own code for them computes on the same inputs, within 1e-5 (tests/nodes/fixtures/comfyui_seedvr2_nodes.json.xz,
recorded by scripts/record_comfyui_seedvr2_nodes.py from comfy_extras/nodes_seedvr.py and
comfy/ldm/seedvr/color_fix.py of the newest Comfy-Org/ComfyUI source)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodes.library.seedvr2 import (
    SeedVR2PostProcessing,
    SeedVR2Preprocess,
    SeedVR2TemporalChunk,
    SeedVR2TemporalMerge,
)
from tests.recorded_tensors import at_recorded, load_json, tensor

RECORDED = load_json(Path(__file__).parent / "fixtures" / "comfyui_seedvr2_nodes.json.xz")


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _close(ours: torch.Tensor, entry: dict) -> None:
    expected = tensor(entry)
    got = at_recorded(ours, entry)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()


@pytest.mark.parametrize("case", RECORDED["preprocess"], ids=lambda c: str(c["input"]["shape"]))
def test_preprocess_pads_as_comfyui(case):
    (out,) = SeedVR2Preprocess().execute(tensor(case["input"]))
    _close(out, case["output"])


@pytest.mark.parametrize("method", ["lab", "wavelet", "adain", "none"])
@pytest.mark.parametrize("case", RECORDED["postprocess"], ids=lambda c: str(c["images"]["shape"]))
def test_postprocessing_matches_comfyui(case, method):
    (out,) = SeedVR2PostProcessing().execute(tensor(case["images"]), tensor(case["original_resized_images"]), method)
    _close(out, case["outputs"][method])


def test_color_correction_changes_the_frames():
    """The methods differ from one another and from none (so the comparisons above test each of them)."""
    case = RECORDED["postprocess"][0]
    outputs = {m: tensor(e) for m, e in case["outputs"].items()}
    for a in outputs:
        for b in outputs:
            if a < b:
                assert (outputs[a] - outputs[b]).abs().max() > 1e-2, (a, b)


@pytest.mark.parametrize("case", RECORDED["chunk"], ids=lambda c: f"{c['frames_per_chunk']}-{c['temporal_overlap']}")
def test_temporal_chunk_splits_as_comfyui(case):
    merge = RECORDED["merge"][RECORDED["chunk"].index(case)]
    chunks, overlap = SeedVR2TemporalChunk().execute(
        {"samples": tensor(RECORDED["latent"])},
        case["temporal_overlap"],
        "manual",
        **{"chunking_mode.frames_per_chunk": case["frames_per_chunk"]},
    )
    assert overlap == case["effective_overlap"] == merge["temporal_overlap"]
    assert len(chunks) == len(case["chunks"])
    for ours, entry in zip(chunks, case["chunks"], strict=True):
        assert torch.equal(ours["samples"], tensor(entry))


@pytest.mark.parametrize("case", RECORDED["merge"], ids=lambda c: f"{len(c['latents'])}-{c['temporal_overlap']}")
def test_temporal_merge_crossfades_as_comfyui(case):
    latents = [{"samples": tensor(e), "noise_mask": torch.ones(1)} for e in case["latents"]]
    (out,) = SeedVR2TemporalMerge().execute(latents, [case["temporal_overlap"]])
    assert "noise_mask" not in out
    _close(out["samples"], case["output"])


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="frames_per_chunk must be 4n\\+1"):
        SeedVR2TemporalChunk().execute(
            {"samples": torch.zeros(1, 16, 3, 2, 2)}, 0, "manual", **{"chunking_mode.frames_per_chunk": 6}
        )
    with pytest.raises(ValueError, match="SeedVR2 video latent"):
        SeedVR2TemporalChunk().execute({"samples": torch.zeros(1, 4, 3, 2, 2)}, 0, "auto")
    with pytest.raises(ValueError, match="color_correction_method"):
        SeedVR2PostProcessing().execute(torch.zeros(1, 4, 4, 3), torch.zeros(1, 4, 4, 3), "hsv")
    with pytest.raises(ValueError, match="4-D or 5-D"):
        SeedVR2Preprocess().execute(torch.zeros(4, 4, 3))
