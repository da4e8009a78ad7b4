"""Today's ComfyUI Draw BBoxes, Crop By BBoxes and Curve Editor (all newer than ComfyUI 0.10.0, so none can be run
from a released ComfyUI here). Draw BBoxes and Crop By BBoxes equal bit for bit what the newest source's code of
them gives in ComfyUI 0.10.0's environment (tests/nodes/fixtures/comfyui_bbox_nodes.json.xz, recorded by
scripts/record_comfyui_bbox_nodes.py); the rest is checked against the semantics read from the newest source
(comfy_extras/nodes_rtdetr.py, nodes_sdpose.py, nodes_curve.py, comfy_api's curve types), with the expected values
worked out by hand in each test; and one prompt of them runs through validation and the engine."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from comfy_bridge import compat
from tests.nodes.engine_run import run_core_prompt

compat.install()
import nodes  # noqa: E402
from tests.recorded_tensors import load_json

RED, GREEN = (1.0, 0.0, 0.0), (0.0, 200 / 255, 0.0)
REPO = Path(__file__).resolve().parents[2]
FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_bbox_nodes.json.xz")


def _recorder():
    spec = importlib.util.spec_from_file_location("record_bbox", REPO / "scripts" / "record_comfyui_bbox_nodes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


def _decode(entry: dict) -> torch.Tensor:
    values = np.frombuffer(base64.b64decode(entry["float32_base64"]), dtype=np.float32)
    return torch.from_numpy(values.copy()).reshape(entry["shape"])


def _node(name: str):
    return nodes.NODE_CLASS_MAPPINGS[name]()


def _draw(bboxes, image=None) -> torch.Tensor:
    return _node("DrawBBoxes").execute(bboxes, image)[0]


def _pixel(image: torch.Tensor, x: int, y: int, frame: int = 0) -> tuple:
    return tuple(round(v, 4) for v in image[frame, y, x].tolist())


# --- Draw BBoxes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", RECORDER.DRAW_CASES, ids=lambda c: c[0])
def test_draw_bboxes_equals_todays_comfyui(case):
    name, image, bboxes = case
    out = _draw(bboxes, RECORDER.inputs()[image] if image else None)
    expected = _decode(FIXTURE["draw"][name])
    assert out.shape == expected.shape and torch.equal(out, expected), name


@pytest.mark.parametrize("case", RECORDER.CROP_CASES, ids=lambda c: c[0])
def test_crop_by_bboxes_equals_todays_comfyui(case):
    torch.set_num_threads(1)
    name, image, bboxes, width, height, padding = case
    out = _node("CropByBBoxes").execute(RECORDER.inputs()[image], bboxes, width, height, padding)[0]
    expected = _decode(FIXTURE["crop"][name])
    assert out.shape == expected.shape and torch.equal(out, expected), name


def test_draw_bboxes_truncates_levels_to_8_bits_as_comfyuis_pil_round_trip_does():
    image = torch.full((1, 4, 5, 3), 0.5)  # 127.5 levels: truncated to 127, not rounded to 128
    out = _draw([], image)
    assert out.shape == (1, 4, 5, 3)
    assert torch.equal(out, torch.full((1, 4, 5, 3), 127 / 255))


def test_a_box_is_a_3_pixel_outline_and_an_unknown_label_is_drawn_without_text_in_the_first_colour():
    image = torch.zeros(1, 20, 30, 3)
    out = _draw({"x": 5, "y": 4, "width": 12, "height": 10, "label": "not a coco class", "score": 0.7}, image)
    for x, y in ((5, 4), (7, 6), (17, 14), (15, 12), (11, 4), (5, 9)):
        assert _pixel(out, x, y) == RED, (x, y)
    for x, y in ((8, 7), (11, 9), (14, 11), (4, 4), (18, 14), (11, 3)):
        assert _pixel(out, x, y) == (0.0, 0.0, 0.0), (x, y)


def test_a_coco_label_picks_its_colour_and_writes_label_and_score():
    image = torch.zeros(1, 60, 120, 3)
    out = _draw([{"x": 10, "y": 10, "width": 100, "height": 40, "label": "bicycle", "score": 0.5}], image)
    green = torch.tensor(GREEN)
    outline = torch.isclose(out[0], green, atol=1e-6).all(-1)
    assert outline[10, 10] and outline[50, 110]
    # the text (antialiased): green-only pixels inside the box, away from its outline; none for an unknown label
    inside = out[0, 13:47, 13:107]
    assert ((inside[..., 1] > 0.3) & (inside[..., 0] == 0) & (inside[..., 2] == 0)).sum() > 20
    unknown = _draw([{"x": 10, "y": 10, "width": 100, "height": 40, "label": "unicycle", "score": 0.5}], image)
    assert not unknown[0, 13:47, 13:107].any()


def test_the_best_scored_box_is_drawn_last():
    box = {"x": 2, "y": 2, "width": 10, "height": 10}
    person, bicycle = {**box, "label": "person"}, {**box, "label": "bicycle"}  # class 0 red, class 1 green
    image = torch.zeros(1, 40, 40, 3)
    assert _pixel(_draw([{**person, "score": 0.2}, {**bicycle, "score": 0.9}], image), 2, 12) == tuple(
        round(v, 4) for v in GREEN
    )
    assert _pixel(_draw([{**person, "score": 0.9}, {**bicycle, "score": 0.2}], image), 2, 12) == RED


def test_without_an_image_the_canvas_is_black_and_just_holds_the_boxes():
    out = _draw([[{"x": 3, "y": 4, "width": 20, "height": 11}, {"x": 10, "y": 1, "width": 5, "height": 30}]])
    assert out.shape == (1, 31, 23, 3)
    assert _pixel(out, 20, 25) == (0.0, 0.0, 0.0) and _pixel(out, 3, 4) == RED
    assert _draw([]).shape == (1, 640, 640, 3)


def test_one_list_serves_every_frame_and_per_frame_lists_leave_later_frames_clean():
    image = torch.zeros(3, 16, 16, 3)
    box = {"x": 1, "y": 1, "width": 8, "height": 8}
    same = _draw([box], image)
    assert all(_pixel(same, 1, 1, f) == RED for f in range(3))
    per_frame = _draw([[box], [], [box]], image)
    assert [_pixel(per_frame, 1, 1, f) for f in range(3)] == [RED, (0.0, 0.0, 0.0), RED]
    first_only = _draw([[box], []], image)  # fewer lists than frames: the rest have no boxes
    assert [_pixel(first_only, 1, 1, f) for f in range(3)] == [RED, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)]


def test_a_grey_image_passes_through_without_boxes_and_is_refused_with_them():
    grey = torch.full((1, 6, 7, 1), 0.5)
    assert torch.equal(_draw([], grey), torch.full((1, 6, 7, 1), 127 / 255))
    with pytest.raises(ValueError, match="1-channel image"):
        _draw({"x": 1, "y": 1, "width": 3, "height": 3}, grey)


def test_draw_bboxes_names_a_value_that_is_not_boxes():
    with pytest.raises(ValueError, match="bboxes must be boxes"):
        _draw([[{"x": 1, "y": 1, "width": 2, "height": 2}], "text"], torch.zeros(2, 8, 8, 3))


# --- Crop By BBoxes -----------------------------------------------------------------------------------------


def _crop(image, bboxes, width=64, height=64, padding=0) -> torch.Tensor:
    return _node("CropByBBoxes").execute(image, bboxes, width, height, padding)[0]


def _expected(image: torch.Tensor, frame: int, x1: int, y1: int, x2: int, y2: int, w: int, h: int) -> torch.Tensor:
    region = image[frame : frame + 1, y1:y2, x1:x2].movedim(-1, 1)
    return F.interpolate(region, size=(h, w), mode="bilinear").movedim(1, -1)


def test_crop_is_the_union_of_a_frames_boxes_grown_by_the_padding_inside_the_image():
    torch.manual_seed(0)
    image = torch.rand(1, 40, 50, 3)
    boxes = [[{"x": 10, "y": 12, "width": 8, "height": 5}, {"x": 20.7, "y": 5, "width": 10, "height": 6}]]
    # union x 10..30 (int(20.7 + 10)), y 5..17; padding 7 grows it to 3..37 x 0..24 (y clipped at the top)
    out = _crop(image, boxes, 64, 72, padding=7)
    assert out.shape == (1, 72, 64, 3)
    assert torch.equal(out, _expected(image, 0, 3, 0, 37, 24, 64, 72))


def test_frames_without_boxes_give_no_crop_and_the_last_list_serves_later_frames():
    torch.manual_seed(1)
    image = torch.rand(3, 30, 30, 3)
    box = {"x": 2, "y": 3, "width": 10, "height": 12}
    out = _crop(image, [[], [box]])  # frame 0 none; frames 1 and 2 take the last list
    assert out.shape == (2, 64, 64, 3)
    assert torch.equal(out[0:1], _expected(image, 1, 2, 3, 12, 15, 64, 64))
    assert torch.equal(out[1:2], _expected(image, 2, 2, 3, 12, 15, 64, 64))
    assert _crop(image, []) is image and torch.equal(_crop(image, [[], []]), image)


def test_one_box_crops_every_frame():
    image = torch.rand(2, 30, 30, 3)
    out = _crop(image, {"x": 5, "y": 5, "width": 10, "height": 10}, 64, 64)
    assert torch.equal(out, torch.cat([_expected(image, f, 5, 5, 15, 15, 64, 64) for f in range(2)]))


def test_a_box_outside_the_image_falls_back_to_a_centred_square_near_the_top():
    image = torch.rand(1, 20, 30, 3)
    out = _crop(image, [[{"x": 100, "y": 100, "width": 5, "height": 5}]])
    # side int(20 * 0.3) = 6, x from (30 - 6) // 2 = 12, y from int(20 * 0.1) = 2
    assert torch.equal(out, _expected(image, 0, 12, 2, 18, 8, 64, 64))
    tiny = torch.rand(1, 3, 3, 4)  # a fallback square of 0 pixels: a black crop
    assert torch.equal(_crop(tiny, [[{"x": 9, "y": 9, "width": 1, "height": 1}]]), torch.zeros(1, 64, 64, 4))


def test_crop_by_bboxes_names_a_flat_list_of_boxes():
    with pytest.raises(ValueError, match="one list of boxes per image"):
        _crop(torch.rand(1, 8, 8, 3), [{"x": 1, "y": 1, "width": 2, "height": 2}])


# --- Curve Editor -------------------------------------------------------------------------------------------


def _curve(raw):
    return _node("CurveEditor").execute(raw)[0]


def test_linear_curve_interpolates_straight_between_points():
    curve = _curve({"points": [[1, 1], [0, 0.2], [0.5, 0.2]], "interpolation": "linear"})
    assert type(curve).__name__ == "LinearCurve" and curve.points == [(0.0, 0.2), (0.5, 0.2), (1.0, 1.0)]
    assert curve.interp(0.75) == pytest.approx(0.6) and curve.interp(-1) == pytest.approx(0.2)
    assert curve.to_lut(5).tolist() == pytest.approx([0.2, 0.2, 0.2, 0.6, 1.0])


def test_monotone_cubic_is_the_hermite_spline_with_mean_secant_tangents():
    curve = _curve({"points": [[0, 0], [0.5, 0.8], [1, 1]]})
    # secants 1.6 and 0.4; tangents 1.6, (1.6 + 0.4) / 2 = 1.0, 0.4; at x = 0.25 (t = 0.5, h = 0.5):
    # 0.125 * 0.5 * 1.6 + 0.5 * 0.8 - 0.125 * 0.5 * 1.0 = 0.4375
    assert curve.interp(0.25) == pytest.approx(0.4375)
    assert curve.interp(0.5) == pytest.approx(0.8) and curve.interp(2.0) == 1.0
    assert curve.interp_array(np.array([0.25, 0.5]))[0] == pytest.approx(0.4375)


def test_monotone_cubic_limits_steep_tangents_so_the_curve_never_overshoots():
    curve = _curve([[0, 0], [0.1, 0.9], [1, 1]])  # bare points: monotone cubic
    lut = curve.to_lut(1001)
    assert np.all(np.diff(lut) >= -1e-12) and lut.max() <= 1.0 + 1e-12
    # secants 9 and 1/9: tangents 9, 4.556, 0.111 put the second segment outside the monotone region (41^2 + 1 > 9),
    # so its tangents are scaled by 3 / sqrt(1682) to 0.33323 and 0.00813; at x = 0.55 (t = 0.5, h = 0.9):
    # 0.45 + 0.125 * 0.9 * 0.33323 + 0.5 - 0.125 * 0.9 * 0.00813 = 0.98657 (unscaled: 1.45, past the last point)
    assert curve.interp(0.55) == pytest.approx(0.9865745, abs=1e-6)


def test_a_flat_run_stays_flat_and_a_peak_gets_a_flat_tangent():
    curve = _curve([[0, 0.3], [0.4, 0.3], [0.7, 0.9], [1, 0.5]])
    assert curve.interp(0.2) == pytest.approx(0.3)
    xs = np.linspace(0.7, 1.0, 50)
    assert curve.interp_array(xs).max() == pytest.approx(0.9)


def test_curve_editor_passes_a_curve_through_and_shows_a_histogram():
    curve = _curve([[0, 0], [1, 1]])
    assert _curve(curve) is curve
    out = _node("CurveEditor").execute([[0, 0], [1, 1]], histogram=(1, 2, 3))
    assert out["ui"] == {"histogram": [1, 2, 3]} and out["result"][0].interp(0.5) == pytest.approx(0.5)


def test_curve_editor_names_points_that_are_not_number_pairs():
    with pytest.raises(ValueError, match="number pairs"):
        _curve({"points": [[0, "a"], [1]]})


def test_comfy_api_input_offers_the_curve_types():
    from comfy_api.input import CurveInput, LinearCurve, MonotoneCubicCurve

    assert isinstance(CurveInput.from_raw({"points": [[0, 0]], "interpolation": "linear"}), LinearCurve)
    assert isinstance(CurveInput.from_raw([[0, 0], [1, 1]]), MonotoneCubicCurve)


# --- through validation and the engine ----------------------------------------------------------------------


def test_bounding_box_nodes_run_in_a_prompt():
    prompt = {
        "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 48, "batch_size": 1, "color": 0}},
        "2": {"class_type": "PrimitiveBoundingBox", "inputs": {"x": 8, "y": 6, "width": 20, "height": 16}},
        "3": {"class_type": "DrawBBoxes", "inputs": {"image": ["1", 0], "bboxes": ["2", 0]}},
        "4": {
            "class_type": "CropByBBoxes",
            "inputs": {"image": ["3", 0], "bboxes": ["2", 0], "output_width": 64, "output_height": 64, "padding": 0},
        },
        "5": {"class_type": "PreviewImage", "inputs": {"images": ["4", 0]}},
    }
    outputs = asyncio.run(run_core_prompt(prompt))
    assert len(outputs["5"]["images"]) == 1


def test_the_curve_widget_value_runs_through_validation_and_the_engine():
    prompt = {
        "1": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0x808080}},
        "2": {"class_type": "ImageHistogram", "inputs": {"image": ["1", 0]}},
        "3": {
            "class_type": "CurveEditor",
            "inputs": {
                "histogram": ["2", 1],
                "curve": {"points": [[0, 0], [0.5, 0.8], [1, 1]], "interpolation": "monotone_cubic"},
            },
        },
        "4": {"class_type": "PreviewAny", "inputs": {"source": ["3", 0]}},
    }
    outputs = asyncio.run(run_core_prompt(prompt))
    assert outputs["3"]["histogram"][128] == 64  # the editor is shown the mid-grey image's levels
    assert "MonotoneCubicCurve" in outputs["4"]["text"][0]
