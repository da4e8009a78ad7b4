"""SAM 3.1 (nodes/models/sam3.py, sam3_text.py, nodes/modelfns/sam3.py) on the tiny demo checkpoint in the released
layout computes what today's ComfyUI's own modules compute on the same file (tests/models/fixtures/comfyui_sam3.json.xz,
recorded by scripts/record_comfyui_sam3.py): the CLIP conditioning and masks (one prompt and `cat:2, dog`), the
detector's boxes, scores, presence and mask logits within 1e-5, and SAM3_Detect's masks and boxes for text (refined
twice, several prompts as individual masks), points and boxes, and SAM3_VideoTrack's tracking (from text; from a
mask with text adding objects). Masks are equal bit for bit on this machine; the tests allow 1 cell in 10^4 to
threshold the other way under another CPU's float32 kernels."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.library.sam3 import normalised_boxes, text_prompts
from nodes.modelfns.sam3 import Sam3Detect, Sam3DetectParams, resize
from nodes.models.detect import probe
from nodes.models.loader import load_text_encoder
from nodes.models.safetensors_io import load_state_dict
from nodes.models.sam3 import load_sam3
from nodes.models.sam3_demo import FILE, build_demo_sam3
from nodes.models.sam3_text import multi_cond
from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import at_recorded, load_json, tensor

RECORDED = load_json(Path(__file__).parent / "fixtures" / "comfyui_sam3.json.xz")


def _image() -> torch.Tensor:
    spec = RECORDED["image"]
    gen = torch.Generator().manual_seed(spec["seed"])
    img = torch.rand(1, spec["height"], spec["width"], 3, generator=gen) * 0.5
    img[:, 10:40, 20:60] += 0.4  # as the recorder draws it
    return img


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    (path,) = build_demo_sam3(tmp_path_factory.mktemp("sam3"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    clip = load_text_encoder(ModelRef("text_encoder", "sam31", (str(path),), (file_digest(path),)))
    model = load_sam3(load_state_dict(str(path)), str(path))
    yield path, clip, model
    torch.set_num_threads(threads)


def _close(ours: torch.Tensor, entry: dict, floor: float = 1e-5) -> None:
    expected = tensor(entry)
    got = at_recorded(ours, entry)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=max(floor, ulps_of_largest(expected, 16)), rtol=0), (
        (got - expected).abs().max()
    )


def _flips(cells: int) -> int:
    """Mask cells allowed to differ: logits within float32 rounding of 0 may threshold either way on another CPU's
    kernels (on the machine that recorded them the masks are equal bit for bit); 1 in 10^4."""
    return cells // 10_000


def _encode(clip, text: str) -> list:
    tokens = clip.tokenize(text)
    cond, _ = clip.encode(tokens)
    extra = clip.extras(tokens)
    opts = {"attention_mask": extra["attention_mask"]}
    if "sam3_multi_cond" in extra:
        opts["sam3_multi_cond"] = multi_cond(extra)
    return [[cond, opts]]


def test_the_demo_file_is_the_recorded_one_and_detected(loaded):
    from scripts.comfyui_recording import sha256

    path = loaded[0]
    assert path.as_posix().endswith(FILE) and sha256(str(path)) == RECORDED["sha256"]
    info = probe(str(path))
    assert (info.arch, info.components) == ("sam31", frozenset({"diffusion_model", "text_encoder"}))


@pytest.mark.parametrize("name", sorted(RECORDED["text"]))
def test_text_encoder_matches_comfyui(loaded, name):
    entry = RECORDED["text"][name]
    ((cond, opts),) = _encode(loaded[1], entry["text"])
    _close(cond, entry["cond"])
    assert torch.equal(opts["attention_mask"].float(), tensor(entry["attention_mask"]))
    multi = opts.get("sam3_multi_cond")
    assert (multi is None) == ("multi" not in entry)
    for ours, rec in zip(multi or [], entry.get("multi", [])):
        _close(ours["cond"], rec["cond"])
        assert torch.equal(ours["attention_mask"].float(), tensor(rec["attention_mask"]))
        assert ours["max_detections"] == rec["max_detections"]


def test_detector_matches_comfyui(loaded):
    _, clip, model = loaded
    ((cond, opts),) = _encode(clip, RECORDED["text"]["single"]["text"])
    image = _image()
    with torch.no_grad():
        det = model.detector.detect(
            model.trunk(resize(image)), cond, opts["attention_mask"], orig_size=image.shape[1:3]
        )
    raw = RECORDED["raw"]
    _close(det.boxes, raw["boxes"])
    _close(det.scores, raw["scores"])
    _close(det.presence, raw["presence"])
    _close(det.masks, raw["masks"])


@pytest.mark.parametrize("name", ["text_refine2", "multi_individual", "points", "boxes"])
def test_sam3_detect_matches_comfyui(loaded, name):
    _, clip, model = loaded
    case = RECORDED["detect"][name]
    kwargs = case["kwargs"]
    image = _image()
    prompts = text_prompts(_encode(clip, RECORDED["text"][case["prompt"]]["text"])) if case["prompt"] else []
    import json

    points = [[p["x"], p["y"], 1] for p in json.loads(kwargs.get("positive_coords", "[]"))]
    points += [[p["x"], p["y"], 0] for p in json.loads(kwargs.get("negative_coords", "[]"))]
    params = Sam3DetectParams(
        refine_iterations=kwargs.get("refine_iterations", 2),
        individual_masks=kwargs.get("individual_masks", False),
        max_detections=[n for _, _, n in prompts],
        boxes=normalised_boxes(kwargs.get("bboxes"), 1, image.shape[1], image.shape[2]),
        points=points,
    )
    inputs = {"image": image}
    for i, (c, m, _) in enumerate(prompts):
        inputs[f"text.{i}"], inputs[f"mask.{i}"] = c, m
    out = Sam3Detect().execute(model, inputs, params)
    expected = tensor(case["masks"])
    assert out["masks"].shape == expected.shape
    assert int((out["masks"] != expected).sum()) <= _flips(expected.numel())
    boxes = [b for frame in case["bboxes"] for b in frame]
    assert out["boxes"].shape[0] == len(boxes)
    for ours, rec in zip(out["boxes"].tolist(), boxes):
        want = [rec["x"], rec["y"], rec["width"], rec["height"], rec["score"]]
        assert max(abs(a - b) for a, b in zip(ours[1:], want)) < 1e-4, (ours, rec)


def _clip() -> torch.Tensor:
    gen = torch.Generator().manual_seed(6)
    clip = torch.rand(3, 40, 56, 3, generator=gen) * 0.4
    for i in range(3):
        clip[i, 8:30, 10 + 3 * i : 40 + 3 * i] += 0.5  # as the recorder draws it
    return clip


@pytest.mark.parametrize("name", ["text", "mask_and_text"])
def test_video_track_matches_comfyui(loaded, name):
    """SAM3_VideoTrack's tracker: the same objects and masks (bit-packed), scores within 1e-6."""
    from nodes.models.sam3_video import Sam3VideoModel, VideoRun, load_sam3_video, unpack_masks

    path, clip, _ = loaded
    model = load_sam3_video(load_state_dict(str(path)), str(path))
    assert isinstance(model, Sam3VideoModel)
    rec = RECORDED["video"][name]
    ((cond, opts),) = _encode(clip, RECORDED["text"]["single"]["text"])
    initial = None
    if name == "mask_and_text":
        initial = torch.zeros(1, 1, 40, 56)
        initial[:, :, 8:30, 10:40] = 1.0
    run = VideoRun(model, [(cond, opts["attention_mask"])], 0.5, rec["max_objects"], 1)
    out = run.run(_clip().movedim(-1, 1), initial, model.tracker.multiplex)
    expected = torch.tensor(rec["packed"]["u8"], dtype=torch.uint8).view(rec["packed"]["shape"])
    assert out["packed_masks"].shape == expected.shape
    flipped = unpack_masks(out["packed_masks"]) != unpack_masks(expected)
    assert int(flipped.sum()) <= _flips(flipped.numel())
    assert 0 < int(expected.count_nonzero()) < expected.numel()  # neither empty nor full
    assert out["n_frames"] == rec["n_frames"]
    assert max(abs(a - b) for a, b in zip(out["scores"], rec["scores"])) < 1e-6
    assert len(out["scores"]) == len(rec["scores"])


@pytest.fixture(scope="module")
def sam3_loaded(tmp_path_factory):
    """The SAM 3 (not 3.1) file of the demo builder: 4-level necks, scalp, the single SAM decoder."""
    from safetensors.torch import save_file

    from nodes.models.sam3_demo import tiny_state_dict

    path = tmp_path_factory.mktemp("sam3_plain") / "sam3_tiny.safetensors"
    save_file(tiny_state_dict(RECORDED["sam3"]["seed"], multiplex=False), str(path))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    clip = load_text_encoder(ModelRef("text_encoder", "sam3", (str(path),), (file_digest(path),)))
    yield path, clip, load_sam3(load_state_dict(str(path)), str(path))
    torch.set_num_threads(threads)


def test_sam3_file_detects_as_comfyui(sam3_loaded):
    path, clip, model = sam3_loaded
    assert probe(str(path)).arch == "sam3" and not model.cfg.multiplex
    rec = RECORDED["sam3"]
    ((cond, opts),) = _encode(clip, RECORDED["text"]["single"]["text"])
    _close(cond, rec["cond"])
    image = _image()
    with torch.no_grad():
        det = model.detector.detect(
            model.trunk(resize(image)), cond, opts["attention_mask"], orig_size=image.shape[1:3]
        )
    for key in ("boxes", "scores", "presence", "masks"):
        _close(getattr(det, key), rec["raw"][key])
    for name, kwargs in (
        ("text_refine2", {"refine_iterations": 2}),
        ("points", {"points": [[30, 20, 1], [70, 50, 0]]}),
    ):
        prompts = text_prompts([[cond, opts]]) if name == "text_refine2" else []
        params = Sam3DetectParams(max_detections=[n for _, _, n in prompts], **kwargs)
        inputs = {"image": image, **{f"text.{i}": c for i, (c, _, _) in enumerate(prompts)}}
        inputs.update({f"mask.{i}": m for i, (_, m, _) in enumerate(prompts)})
        out = Sam3Detect().execute(model, inputs, params)
        expected = tensor(rec["detect"][name]["masks"])
        assert out["masks"].shape == expected.shape
        assert int((out["masks"] != expected).sum()) <= _flips(expected.numel())
        boxes = [b for frame in rec["detect"][name]["bboxes"] for b in frame]
        assert out["boxes"].shape[0] == len(boxes)
