"""SeedVR2's image path through the cluster without its sampler (tests/e2e/test_seedvr2_workflow.py has it): the
workspace's example.png through SeedVR2Preprocess, VAELoader's tiny SeedVR2 VAE (demo-models writes it on a fresh
workspace's first start), VAEEncodeTiled and VAEDecodeTiled (64-pixel tiles, several of them), SeedVR2PostProcessing
(lab) and SaveImage. The image is the same with the default executors and with `--executors 0`, and within 1/255 of
what today's ComfyUI's own code (nodes_seedvr.py, vae.py, comfy/sd.py's conventions) makes of the same graph on the
same files (recorded by scripts/record_comfyui_seedvr2_vae.py)."""

from __future__ import annotations

from pathlib import Path

from nodes.models.seedvr2_demo import VAE_FILE
from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_seedvr2_vae.json.xz")["workflow"]


def prompt(tile: int, overlap: int) -> dict:
    tiled = {"tile_size": tile, "overlap": overlap, "temporal_size": 64, "temporal_overlap": 8}
    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "2": {"class_type": "SeedVR2Preprocess", "inputs": {"resized_images": ["1", 0]}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": Path(VAE_FILE).name}},
        "4": {"class_type": "VAEEncodeTiled", "inputs": {"pixels": ["2", 0], "vae": ["3", 0], **tiled}},
        "5": {"class_type": "VAEDecodeTiled", "inputs": {"samples": ["4", 0], "vae": ["3", 0], **tiled}},
        "6": {
            "class_type": "SeedVR2PostProcessing",
            "inputs": {"images": ["5", 0], "original_resized_images": ["1", 0], "color_correction_method": "lab"},
        },
        "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "seedvr2"}},
    }


def test_upscale_graph_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    image = render_in_both_modes(tmp_path, prompt(RECORDED["tile"], RECORDED["overlap"]))
    assert image.shape == (128, 128, 3) and image.std() > 0
    assert_within_1_of_255_of_record(image, RECORDED["image"])
