"""SAM 3's node plumbing without a model (nodes/library/sam3.py, sam3_preview.py): conditioning to prompts,
BOUNDING_BOX to normalised boxes, SAM3_TrackToMask's chosen objects, SAM3_TrackPreview's blend and labels, and the
bit packing both sides share (nodes/models/sam3_video.py)."""

from __future__ import annotations

import torch

from nodes.library.sam3 import SAM3_TrackToMask, normalised_boxes, text_prompts, unpack_masks
from nodes.library.sam3_preview import PALETTE, render_tracks
from nodes.models.sam3_text import parse_prompts
from nodes.models.sam3_video import pack_masks


def _track() -> dict:
    logits = torch.full((2, 3, 1008, 1008), -1.0)
    logits[:, 0, :504] = 1.0  # top half
    logits[:, 2, :, :504] = 1.0  # left half
    return {"packed_masks": pack_masks(logits), "n_frames": 2, "scores": [1.0, 0.5, 0.25], "orig_size": (64, 96)}


def test_packing_round_trips() -> None:
    x = torch.randn(3, 16, 40)
    assert torch.equal(unpack_masks(pack_masks(x)), x > 0)


def test_prompts_from_conditioning_and_text() -> None:
    assert parse_prompts("(cat):2, dog , big car: 2.6,") == [("cat", 2), ("dog", 1), ("big car", 3)]
    cond = torch.randn(1, 32, 8)
    (one,) = text_prompts([[cond, {}]])
    assert one[0] is cond and one[1].shape == (1, 32) and bool(one[1].all()) and one[2] == 1
    multi = [
        {"cond": cond, "attention_mask": torch.ones(1, 32), "max_detections": 3},
        {"cond": cond, "attention_mask": None},
    ]
    assert [n for _, _, n in text_prompts([[cond, {"sam3_multi_cond": multi}]])] == [3, 1]


def test_boxes_are_normalised_per_frame() -> None:
    box = {"x": 10, "y": 20, "width": 30, "height": 40}
    assert normalised_boxes(box, 2, 100, 200) == [[[0.125, 0.4, 0.15, 0.4]]] * 2
    per_frame = normalised_boxes([[box], []], 3, 100, 200)
    assert per_frame[1] == [] and per_frame[2] == []


def test_track_to_mask_unions_the_chosen_objects() -> None:
    (masks,) = SAM3_TrackToMask().execute(_track(), "0, 2, 7")
    assert masks.shape == (2, 64, 96)
    assert masks[0, 0, 0] == 1 and masks[0, 63, 0] == 1 and masks[0, 0, 95] == 1 and masks[0, 63, 95] == 0
    (only_empty,) = SAM3_TrackToMask().execute(_track(), "1")
    assert only_empty.sum() == 0


def test_preview_blends_object_colours_and_labels_them() -> None:
    images = torch.full((2, 64, 96, 3), 0.2)
    frames = render_tracks(_track(), images, 0.5)
    assert frames.shape == (2, 64, 96, 3)
    top_left = torch.tensor(PALETTE[0]) * 0.5 + 0.1  # top and left: the first object's colour
    assert torch.allclose(frames[0, 1, 1], top_left)
    assert torch.allclose(frames[0, 62, 94], torch.full((3,), 0.2))
    assert (frames[0] == 0).all(dim=-1).any()  # the labels' black outlines
