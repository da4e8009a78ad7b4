"""Kandinsky 5's text encoders (nodes/models/kandinsky5_text.py, DualCLIPLoader types kandinsky5 and kandinsky5_image)
against ComfyUI 0.10.0 on the tiny Qwen2.5-VL and CLIP-L files (scripts/record_comfyui_kandinsky5_text.py): token ids,
the conditioning (the last block's states before the final norm, from the template's end) and CLIP-L's pooled vector."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_kandinsky5_text.json.xz")
QWEN, CLIP_L = FIXTURE["files"]


def encoder(ws, clip_type: str, order=(QWEN, CLIP_L)):
    from nodes.loaders import DualCLIPLoader

    (ref,) = DualCLIPLoader().load_clip(*(Path(p).name for p in order), clip_type)
    from nodes.models.loader import load_text_encoder

    return load_text_encoder(ref)


def test_fixture_was_recorded_on_these_files(demo_workspace):
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((demo_workspace.models_dir / rel).read_bytes()).hexdigest() == digest, rel
    # ComfyUI holds CLIP-L in the Qwen file's dtype (bfloat16): the loader rounds its weights alike
    for held in FIXTURE["held_dtypes"].values():
        assert held == {"qwen25_7b.transformer.model.": ["torch.bfloat16"], "clip_l.transformer.": ["torch.bfloat16"]}


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_conditioning_equals_comfyuis(demo_workspace, case: str):
    torch.set_num_threads(1)
    want = FIXTURE["cases"][case]
    te = encoder(demo_workspace, want["type"])
    tokens = te.tokenize(want["prompt"])
    assert [t for chunk in tokens["qwen25_7b"] for t, _ in chunk] == want["qwen_ids"]
    assert [[t for t, _ in chunk] for chunk in tokens["l"]] == want["clip_ids"]
    cond, pooled = te.encode(tokens)
    # ComfyUI adds the text's attention mask beside the conditioning only where a pad token masks part of it; its
    # Kandinsky 5 DiT takes the mask but reads it nowhere (the encoder masked the pad tokens' attention itself)
    padded = "<|endoftext|>" in want["prompt"]
    assert want["extra_keys"] == (["attention_mask", "pooled_output"] if padded else ["pooled_output"])
    torch.testing.assert_close(cond, tensor(want["cond"]), atol=1e-5, rtol=0)
    torch.testing.assert_close(pooled, tensor(want["pooled"]), atol=1e-5, rtol=0)


def test_files_in_either_order_and_bad_pairs_refused(demo_workspace):
    from nodes.models.errors import ModelLoadError

    torch.set_num_threads(1)
    want = FIXTURE["cases"]["kandinsky5/plain"]
    te = encoder(demo_workspace, "kandinsky5", order=(CLIP_L, QWEN))
    cond, pooled = te.encode(te.tokenize(want["prompt"]))
    torch.testing.assert_close(pooled, tensor(want["pooled"]), atol=1e-5, rtol=0)
    with pytest.raises(ModelLoadError, match="Qwen2.5-VL text encoder and a CLIP-L"):
        encoder(demo_workspace, "kandinsky5", order=(CLIP_L, CLIP_L))
    with pytest.raises(ValueError, match="reads no images"):
        te.tokenize("x", images=1)


def test_the_video_and_image_templates_differ(demo_workspace):
    video, image = FIXTURE["cases"]["kandinsky5/plain"], FIXTURE["cases"]["kandinsky5_image/plain"]
    assert video["qwen_ids"] != image["qwen_ids"] and video["clip_ids"] == image["clip_ids"]
