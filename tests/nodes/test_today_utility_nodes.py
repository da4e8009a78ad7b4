"""Today's ComfyUI utility nodes (logic, math, resolution, lists, batches, manual sigmas, image compare):
what each computes, and how the engine runs them (lazy switch branches, dotted dynamic inputs, list expansion).

ManualSigmas, the Batch nodes and the switch's lazy choice are compared with upstream ComfyUI 0.10.0's own
outputs (tests/nodes/fixtures/comfyui_today_nodes.json, scripts/record_comfyui_today_nodes.py). The nodes
newer than 0.10.0 (math expression, number convert, resolution selector, lists, Not/And/Or/Pass or None,
custom combo) cannot be run from a released ComfyUI here: they are checked against the semantics read
from the newest ComfyUI source, with the expected numbers worked out by hand in each test."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from comfy_bridge import compat
from comfy_bridge.execution import PromptExecutor
from comfy_bridge.execution.graph_utils import GraphBuilder
from comfy_bridge.registry import NodeRegistry
from comfy_bridge.validation import validate_prompt

compat.install()
import nodes  # noqa: E402

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_today_nodes.json").read_text())
REPO = Path(__file__).resolve().parents[2]
CALLS: list[str] = []


def _recorder_inputs() -> dict[str, torch.Tensor]:
    spec = importlib.util.spec_from_file_location("record_today", REPO / "scripts" / "record_comfyui_today_nodes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.inputs()


class Num:
    """A counted constant (INT), so a test sees which branches ran."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 0, "min": -1000, "max": 1000})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"

    def run(self, value: int):
        CALLS.append(f"Num{value}")
        return (value,)


class Keep:
    """An output node recording what reached it (once per list item)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("*", {})}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, value):
        return {"ui": {"values": [value]}}


@pytest.fixture
def run(tmp_path):
    from nodes.workspace import Workspace, activate

    activate(Workspace(tmp_path / "ws").create())
    CALLS.clear()
    registry = NodeRegistry()
    registry.add_builtin({**nodes.NODE_CLASS_MAPPINGS, "Num": Num, "Keep": Keep})

    class Sink:
        client_id = last_node_id = None

        def send_sync(self, *args, **kwargs):
            pass

    async def _run(prompt: dict) -> dict:
        ok, error, outputs, node_errors = await validate_prompt(registry, "p", prompt, None)
        assert ok, (error, node_errors)
        executor = PromptExecutor(registry, Sink(), cache_type="classic", cache_size=0)
        await executor.execute_async(prompt, "p", {}, outputs)
        assert executor.success, executor.status_messages
        return executor.history_result["outputs"]

    return _run


def _node(cls: str):
    return nodes.NODE_CLASS_MAPPINGS[cls]()


# --- the switch: only the chosen branch runs -------------------------------------------------------------


@pytest.mark.parametrize("switch", [True, False])
async def test_the_switch_computes_only_the_branch_it_passes_on(run, switch):
    g = GraphBuilder(prefix="")
    sw = g.node(
        "ComfySwitchNode",
        "sw",
        switch=switch,
        on_false=g.node("Num", "f", value=1).out(0),
        on_true=g.node("Num", "t", value=2).out(0),
    )
    g.node("Keep", "k", value=sw.out(0))
    outputs = await run(g.finalize())
    assert outputs["k"] == {"values": [2 if switch else 1]}
    assert CALLS == (["Num2"] if switch else ["Num1"])


async def test_the_switch_gives_none_for_an_unlinked_branch(run):
    g = GraphBuilder(prefix="")
    sw = g.node("ComfySwitchNode", "sw", switch=False, on_true=g.node("Num", "t", value=2).out(0))
    g.node("Keep", "k", value=sw.out(0))
    assert (await run(g.finalize()))["k"] == {"values": [None]}
    assert CALLS == []


def test_the_switch_asks_for_the_inputs_comfyui_0_10_asks_for():
    ours = {}
    for key in FIXTURE["switch_lazy"]:
        s, f, t = key.split("-")
        value = {"None": None, "1": 1, "2": 2}
        ours[key] = _node("ComfySwitchNode").check_lazy_status(s == "True", value[f], value[t]) or None
    assert ours == FIXTURE["switch_lazy"]


# --- logic ------------------------------------------------------------------------------------------------


def test_not_and_or_follow_pythons_truth_rules():
    assert _node("ComfyNotNode").execute(value=0) == (True,)
    assert _node("ComfyNotNode").execute(value="text") == (False,)
    assert _node("ComfyAndNode").execute(**{"values.value0": 1, "values.value1": "x"}) == (True,)
    assert _node("ComfyAndNode").execute(**{"values.value0": 1, "values.value1": []}) == (False,)
    assert _node("ComfyOrNode").execute(**{"values.value0": 0, "values.value1": None}) == (False,)
    assert _node("ComfyOrNode").execute(**{"values.value0": 0, "values.value1": 3}) == (True,)


def test_pass_or_none_falls_back_to_the_default():
    node = _node("ComfyPassOrNoneNode")
    assert node.execute(anything=5, default=1) == (5, False)
    assert node.execute(anything=None, default=1) == (1, False)
    assert node.execute() == (None, True)


async def test_custom_combo_accepts_the_users_options_and_index(run):
    prompt = {
        "c": {
            "class_type": "CustomCombo",
            "inputs": {"choice": "16:9", "index": 1, "option0": "9:16", "option1": "16:9"},
        },
        "k": {"class_type": "Keep", "inputs": {"value": ["c", 1]}},
        "k2": {"class_type": "Keep", "inputs": {"value": ["c", 0]}},
    }
    outputs = await run(prompt)
    assert outputs["k"] == {"values": [1]} and outputs["k2"] == {"values": ["16:9"]}


# --- math -------------------------------------------------------------------------------------------------


async def test_the_math_expression_reads_its_linked_values_by_letter(run):
    g = GraphBuilder(prefix="")
    m = g.node(
        "ComfyMathExpression",
        "m",
        expression="(a + b) * 2 - sum(values)",
        **{"values.a": g.node("Num", "a", value=3).out(0), "values.b": g.node("Num", "b", value=4).out(0)},
    )
    g.node("Keep", "kf", value=m.out(0))
    g.node("Keep", "ki", value=m.out(1))
    g.node("Keep", "kb", value=m.out(2))
    outputs = await run(g.finalize())
    assert (outputs["kf"], outputs["ki"], outputs["kb"]) == ({"values": [7.0]}, {"values": [7]}, {"values": [True]})


@pytest.mark.parametrize(
    "expression, values, expected",
    [
        ("a / b", {"a": 7, "b": 2}, (3.5, 3, True)),
        ("-a / b", {"a": 7, "b": 2}, (-3.5, -3, True)),  # int() truncates towards zero
        ("a > 2048", {"a": 1024}, (0.0, 0, False)),  # a boolean result counts as 0 / 1
        ("max(a, b) + floor(sqrt(c))", {"a": 1, "b": 5.5, "c": 10}, (8.5, 8, True)),
        ("a and b", {"a": True, "b": False}, (0.0, 0, False)),
        ("pow(a, 3)", {"a": 2}, (8.0, 8, True)),
    ],
)
def test_math_expression_results(expression, values, expected):
    kwargs = {f"values.{k}": v for k, v in values.items()}
    assert _node("ComfyMathExpression").execute(expression, **kwargs) == expected


@pytest.mark.parametrize(
    "expression, message",
    [
        ("  ", "empty"),
        ("'text'", "not a number"),
        ("a / 0.0 * 1e308 * 1e308", None),
        ("pow(a, 5000)", "4000"),
        ("__import__('os')", None),
        ("1e308 * 10", "not finite"),
    ],
)
def test_math_expression_refuses_what_is_not_a_finite_number(expression, message):
    with pytest.raises(Exception) as err:
        _node("ComfyMathExpression").execute(expression, **{"values.a": 2})
    if message:
        assert message in str(err.value)


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, (1.0, 1)),
        (7, (7.0, 7)),
        (-2.7, (-2.7, -2)),
        (" 12 ", (12.0, 12)),
        ("3.9", (3.9, 3)),
        ("1e3", (1000.0, 1000)),
        ("123456789012345678901", (1.2345678901234568e20, 123456789012345678901)),
    ],
)
def test_number_convert(value, expected):
    assert _node("ComfyNumberConvert").execute(value) == expected


@pytest.mark.parametrize("value", ["", "abc", "inf", float("nan")])
def test_number_convert_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(ValueError, match="Number Convert"):
        _node("ComfyNumberConvert").execute(value)


# --- resolution -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ratio, megapixels, multiple, minimum, expected",
    [
        ("1:1 (Square)", 1.0, 8, 256, (1024, 1024)),
        # 16:9 at 1 MP: scale = sqrt(2^20 / 144) = 85.33; 16 * 85.33 = 1365.3 -> 171 * 8; 9 * 85.33 = 768
        ("16:9 (Widescreen)", 1.0, 8, 256, (1368, 768)),
        ("9:16 (Portrait Widescreen)", 1.0, 64, 256, (768, 1344)),  # 1365.3 / 64 = 21.3 -> 21 * 64
        # 21:9 at 0.1 MP: scale 23.55, 21 * 23.55 = 494.6 -> 496, 9 * 23.55 = 212.0 -> 208 < 256, so the smallest
        # k with both sides multiples of 8 and >= 256: k >= 256 / 9 = 28.4, k a multiple of lcm(8, 8) = 8 -> 32
        ("21:9 (Ultrawide)", 0.1, 8, 256, (672, 288)),
        ("3:2 (Photo)", 0.1, 8, 256, (400, 264)),  # scale 132.2: 396.6 -> 400, 264.4 -> 264, both >= 256
        ("3:2 (Photo)", 0.1, 8, 512, (768, 512)),  # k >= 512 / 2 = 256, a multiple of 8 -> 768 x 512
    ],
)
def test_resolution_selector(ratio, megapixels, multiple, minimum, expected):
    assert _node("ResolutionSelector").execute(ratio, megapixels, multiple, minimum) == expected


# --- lists ------------------------------------------------------------------------------------------------


async def test_create_list_makes_the_nodes_after_it_run_once_per_item(run):
    g = GraphBuilder(prefix="")
    lst = g.node(
        "CreateList",
        "l",
        **{
            "inputs.input0": g.node("Num", "a", value=5).out(0),
            "inputs.input1": g.node("Num", "b", value=6).out(0),
            "inputs.input2": g.node("Num", "c", value=7).out(0),
        },
    )
    doubled = g.node("ComfyMathExpression", "m", expression="a * 2", **{"values.a": lst.out(0)})
    g.node("Keep", "each", value=doubled.out(1))
    item = g.node("GetItemFromList", "g", list=doubled.out(1), index=-1)
    g.node("Keep", "last", value=item.out(0))
    outputs = await run(g.finalize())
    assert outputs["each"] == {"values": [10, 12, 14]}
    assert outputs["last"] == {"values": [14]}


def test_get_item_from_list_names_an_index_outside_the_list():
    with pytest.raises(IndexError, match="index 3 is outside the list of 2 items"):
        _node("GetItemFromList").execute(list=["a", "b"], index=[3])


# --- recorded from ComfyUI 0.10.0 ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", list(FIXTURE["manual_sigmas"]))
def test_manual_sigmas_read_the_numbers_comfyui_reads(text):
    expected = FIXTURE["manual_sigmas"][text]
    if isinstance(expected, dict):
        with pytest.raises(ValueError):
            _node("ManualSigmas").execute(text)
    else:
        assert _node("ManualSigmas").execute(text)[0].tolist() == expected


def test_batch_nodes_equal_comfyui_0_10():
    torch.set_num_threads(1)
    x = _recorder_inputs()
    images = _node("BatchImagesNode").execute(**{"images.image0": x["rgb_4x6"], "images.image1": x["rgba_5x3"]})[0]
    masks = _node("BatchMasksNode").execute(**{"masks.mask0": x["mask_4x6"], "masks.mask1": x["mask_3x8"]})[0]
    latent = _node("BatchLatentsNode").execute(
        **{
            "latents.latent0": {"samples": x["latent_4x4"]},
            "latents.latent1": {"samples": x["latent_2x6"], "batch_index": [5, 6]},
        }
    )[0]
    for ours, key in ((images, "batch_images"), (masks, "batch_masks"), (latent["samples"], "batch_latents")):
        theirs = FIXTURE[key]
        assert list(ours.shape) == theirs["shape"], key
        torch.testing.assert_close(ours.flatten(), torch.tensor(theirs["values"]), atol=1e-6, rtol=0, msg=key)
    assert latent["batch_index"] == FIXTURE["batch_latents"]["batch_index"]


def test_a_batch_node_with_nothing_linked_says_so():
    with pytest.raises(ValueError, match="no image is linked"):
        _node("BatchImagesNode").execute()


async def test_image_compare_writes_both_images_as_previews(run, tmp_path):
    prompt = {
        "a": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}},
        "b": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 2, "color": 255}},
        "c": {"class_type": "ImageCompare", "inputs": {"image_a": ["a", 0], "image_b": ["b", 0], "compare_view": ""}},
    }
    ui = (await run(prompt))["c"]
    assert [len(ui["a_images"]), len(ui["b_images"])] == [1, 2]
    assert all(i["type"] == "temp" and "comfy.compare.b" in i["filename"] for i in ui["b_images"])


def test_the_v3_fields_of_object_info_equal_todays_comfyui():
    """Beyond the interface test_object_info_matches_comfyui compares: the flags and names the web UI reads."""
    from comfy_bridge.registry import build_registry

    registry = build_registry(None, load_custom_nodes=False)
    reference = json.loads((Path(__file__).parent / "fixtures" / "comfyui_today_object_info.json").read_text())
    keys = ("display_name", "experimental", "output_matchtypes", "output_node")
    for name, theirs in reference["classes"].items():
        ours = json.loads(json.dumps(registry.node_info(name)))
        # a plain (V1) class's entry leaves its false flags out, a V3 node's writes them
        got = {k: ours.get(k, False if k in ("experimental", "output_node") else None) for k in keys}
        expected = {k: theirs.get(k, False if k in ("experimental", "output_node") else None) for k in keys}
        expected["display_name"] = expected["display_name"] or name  # none: the web UI shows the class name
        assert got == expected, name


def _resize_cases():
    spec = importlib.util.spec_from_file_location("record_today", REPO / "scripts" / "record_comfyui_today_nodes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(i, case, name) for i, case in enumerate(module.RESIZE_CASES) for name in module.RESIZE_INPUTS]


@pytest.mark.parametrize("index, case, name", _resize_cases(), ids=lambda v: v if isinstance(v, str) else None)
def test_resize_image_mask_equals_comfyui_0_10(index, case, name):
    torch.set_num_threads(1)
    x = _recorder_inputs()
    mode, params, method = case
    kwargs = {f"resize_type.{k}": x[v] if k == "match" else v for k, v in params.items()}
    ours = _node("ResizeImageMaskNode").execute(x[name], mode, method, **kwargs)[0]
    theirs = FIXTURE["resize"][f"{index}-{name}"]
    expected = torch.tensor(theirs["values"]).reshape(theirs["shape"])
    if method == "lanczos" and ours.ndim == 3:
        # ComfyUI 0.10's lanczos hands a one-channel plane back transposed (the mask comes out height x width
        # swapped, not the size asked for); we give the size asked for, with the same values
        expected = expected.transpose(-1, -2)
    assert ours.shape == expected.shape
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)


def test_resize_image_mask_names_an_unknown_resize_type():
    with pytest.raises(ValueError, match="unknown resize_type 'stretch'"):
        _node("ResizeImageMaskNode").execute(torch.zeros(1, 4, 4, 3), "stretch", "area")


async def test_resize_image_mask_takes_the_dotted_inputs_of_the_chosen_option(run):
    prompt = {
        "i": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 32, "batch_size": 1, "color": 0}},
        "r": {
            "class_type": "ResizeImageMaskNode",
            "inputs": {
                "input": ["i", 0],
                "resize_type": "scale longer dimension",
                "resize_type.longer_size": 16,
                "scale_method": "area",
            },
        },
        "s": {"class_type": "GetImageSize", "inputs": {"image": ["r", 0]}},
        "k": {"class_type": "Keep", "inputs": {"value": ["s", 0]}},
        "k2": {"class_type": "Keep", "inputs": {"value": ["s", 1]}},
    }
    outputs = await run(prompt)
    assert (outputs["k"], outputs["k2"]) == ({"values": [16]}, {"values": [8]})


# --- text, seed, save (newer than 0.10.0: semantics read from the newest source) ------------------------------


def test_format_text_fills_the_linked_values_by_letter():
    node = _node("StringFormat")
    assert node.execute("{a} has {b:.1f} {c!r}", **{"values.a": "x", "values.b": 2.25, "values.c": "y"}) == (
        "x has 2.2 'y'",
    )
    with pytest.raises(ValueError, match="names 'b' but the linked values are a"):
        node.execute("{a}{b}", **{"values.a": 1})


@pytest.mark.parametrize(
    "text, key, expected",
    [
        ('Sure! ```json\n{"prompt": "a cat", "seed": 4}\n```', "prompt", "a cat"),
        ('{"seed": 4}', "seed", "4"),
        ('{"a": null}', "a", ""),
        ('{broken {"a": [1, 2]} tail', "a", "[1, 2]"),  # the first '{' that decodes
        ('{"a": 1}', "missing", ""),
        ("no json here", "a", ""),
    ],
)
def test_json_extract_string(text, key, expected):
    assert _node("JsonExtractString").execute(text, key) == (expected,)


def test_dictionary_and_array_to_json_text():
    assert _node("ConvertDictionaryToString").execute({"é": [1]}, 0) == ('{"é": [1]}',)
    assert _node("ConvertArrayToString").execute([1, {"a": 2}], 2) == ('[\n  1,\n  {\n    "a": 2\n  }\n]',)


def test_seed_passes_its_seed_on():
    assert _node("SeedNode").execute(2**40) == (2**40,)


async def test_save_image_advanced_writes_png_and_passes_the_images_on(run, tmp_path):
    prompt = {
        "i": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 4, "batch_size": 2, "color": 65280}},
        "s": {
            "class_type": "SaveImageAdvanced",
            "inputs": {
                "images": ["i", 0],
                "filename_prefix": "adv",
                "format": "png",
                "format.bit_depth": "8-bit",
                "format.input_color_space": "sRGB",
            },
        },
        "z": {"class_type": "GetImageSize", "inputs": {"image": ["s", 0]}},
        "k": {"class_type": "Keep", "inputs": {"value": ["z", 2]}},
    }
    outputs = await run(prompt)
    names = [i["filename"] for i in outputs["s"]["images"]]
    assert names == ["adv_00001.png", "adv_00002.png"] and outputs["k"] == {"values": [2]}
    from PIL import Image

    from nodes.workspace import active

    with Image.open(active().output_dir / names[0]) as im:
        assert im.size == (8, 4) and im.getpixel((0, 0)) == (0, 255, 0) and "prompt" in im.info


def test_save_image_advanced_refuses_the_formats_it_does_not_write():
    with pytest.raises(ValueError, match="exr 32-bit float is not written"):
        _node("SaveImageAdvanced").execute(torch.zeros(1, 4, 4, 3), "x", "exr", **{"format.bit_depth": "32-bit float"})


# --- Color Transfer (newer than 0.10.0: the properties each method is defined by) ---------------------------


def _frames(seed: int, n: int = 2, tint=(1.0, 1.0, 1.0)) -> torch.Tensor:
    x = torch.rand(n, 12, 10, 3, generator=torch.Generator().manual_seed(seed)) * 0.6 + 0.2
    return (x * torch.tensor(tint)).clamp(0, 1)


def _lab_stats(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    import kornia

    lab = kornia.color.rgb_to_lab(images.permute(0, 3, 1, 2)).permute(1, 0, 2, 3).reshape(3, -1)
    return lab.mean(1), lab.std(1, unbiased=False)


def test_reinhard_gives_the_targets_the_references_lab_mean_and_spread():
    torch.set_num_threads(1)
    target, ref = _frames(1, 1), _frames(2, 1, tint=(1.0, 0.6, 0.3))
    out = _node("ColorTransfer").execute(target, "reinhard_lab", "per_frame", 1.0, image_ref=ref)[0]
    (m_out, s_out), (m_ref, s_ref) = _lab_stats(out), _lab_stats(ref)
    assert torch.allclose(m_out, m_ref, atol=0.5) and torch.allclose(s_out, s_ref, rtol=0.05, atol=0.3)


def test_mkl_gives_the_targets_the_references_lab_covariance():
    from nodes.library.color_transfer import mkl_matrix

    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(3, 3, generator=gen), torch.randn(3, 3, generator=gen)
    cov_s, cov_r = a @ a.T + 0.1 * torch.eye(3), b @ b.T + 0.1 * torch.eye(3)
    t = mkl_matrix(cov_s.double(), cov_r.double())
    assert torch.allclose(t @ cov_s.double() @ t.T, cov_r.double(), atol=1e-8)
    assert torch.allclose(t, t.T, atol=1e-8)  # the MKL map is the symmetric (least-displacement) one


def test_histogram_matching_makes_the_channel_histograms_alike():
    target, ref = _frames(4, 1), _frames(5, 1, tint=(0.3, 1.0, 0.7))
    out = _node("ColorTransfer").execute(target, "histogram", "uniform", 1.0, image_ref=ref)[0]
    for c in range(3):
        q = torch.tensor([0.1, 0.5, 0.9])
        assert torch.allclose(out[..., c].flatten().quantile(q), ref[..., c].flatten().quantile(q), atol=0.02)


def test_color_transfer_strength_zero_or_no_reference_passes_the_targets_through():
    target = _frames(6)
    node = _node("ColorTransfer")
    assert node.execute(target, "mkl_lab", "uniform", 0.0, image_ref=_frames(7))[0] is target
    assert node.execute(target, "reinhard_lab", "uniform", 1.0)[0] is target


def test_color_transfer_target_frame_applies_one_transform_to_every_frame():
    torch.set_num_threads(1)
    target = torch.cat([_frames(8, 1), _frames(8, 1)])  # two equal frames
    target[1] = (target[1] * 0.5).clamp(0, 1)  # the second darker
    out = _node("ColorTransfer").execute(
        target, "reinhard_lab", "target_frame", 1.0, image_ref=_frames(9, 1), **{"source_stats.target_index": 0}
    )[0]
    # one transform for both: the darker frame stays darker
    assert out[1].mean() < out[0].mean() - 0.05
    per_frame = _node("ColorTransfer").execute(target, "reinhard_lab", "per_frame", 1.0, image_ref=_frames(9, 1))[0]
    assert abs(per_frame[1].mean() - per_frame[0].mean()) < 0.05  # each matched on its own: alike


def test_color_transfer_names_an_unknown_method():
    with pytest.raises(ValueError, match="unknown method 'lut'"):
        _node("ColorTransfer").execute(_frames(1), "lut", "uniform", 1.0, image_ref=_frames(2))


# --- loops (unrolled by expansion; the outputs are ComfyUI's Start Loop / End Loop outputs) ---------------------


def _loop(g: GraphBuilder, mode: dict, body: str, accumulate: bool, use: int = 0, **start_inputs):
    start = g.node("StartLoop", "start", **mode, **start_inputs)
    step = g.node("ComfyMathExpression", "body", expression=body, **{"values.a": start.out(use)})
    end = g.node("EndLoop", "end", accumulate=accumulate, output_value=step.out(1))
    g.node("Keep", "k", value=end.out(0))
    return start, step, end


@pytest.mark.parametrize("accumulate, expected", [(True, [1, 11, 21]), (False, [21])])
async def test_a_simple_loop_runs_its_body_once_per_iteration(run, accumulate, expected):
    g = GraphBuilder(prefix="")
    _loop(g, {"mode": "simple", "mode.num_iterations": 3}, "a * 10 + 1", accumulate)
    assert (await run(g.finalize()))["k"] == {"values": expected}


async def test_a_for_loop_counts_from_start_below_max_by_step(run):
    g = GraphBuilder(prefix="")
    _loop(g, {"mode": "For", "mode.start_iteration_index": 2, "mode.max_iteration": 9, "mode.step": 3}, "a", True)
    assert (await run(g.finalize()))["k"] == {"values": [2, 5, 8]}


async def test_a_list_loop_runs_once_per_item(run):
    g = GraphBuilder(prefix="")
    items = g.node(
        "CreateList",
        "l",
        **{f"inputs.input{i}": g.node("Num", f"n{i}", value=v).out(0) for i, v in enumerate((5, 6, 7))},
    )
    _loop(g, {"mode": "List", "mode.list": items.out(0)}, "a * 2", True, use=3)
    assert (await run(g.finalize()))["k"] == {"values": [10, 12, 14]}


async def test_the_carried_value_goes_from_end_loop_to_the_next_iteration(run):
    g = GraphBuilder(prefix="")
    start = g.node(
        "StartLoop",
        "start",
        mode="simple",
        **{"mode.num_iterations": 4},
        initial_iteration_value=g.node("Num", "one", value=1).out(0),
    )
    double = g.node("ComfyMathExpression", "body", expression="a * 2", **{"values.a": start.out(4)})
    end = g.node("EndLoop", "end", accumulate=True, output_value=double.out(1), next_iteration_value=double.out(1))
    g.node("Keep", "k", value=end.out(0))
    assert (await run(g.finalize()))["k"] == {"values": [2, 4, 8, 16]}


async def test_is_first_and_is_last_mark_the_ends(run):
    g = GraphBuilder(prefix="")
    start = g.node("StartLoop", "start", mode="simple", **{"mode.num_iterations": 3})
    flags = g.node(
        "ComfyMathExpression", "body", expression="a + 10 * b", **{"values.a": start.out(1), "values.b": start.out(2)}
    )
    end = g.node("EndLoop", "end", accumulate=True, output_value=flags.out(1))
    g.node("Keep", "k", value=end.out(0))
    assert (await run(g.finalize()))["k"] == {"values": [1, 0, 10]}


def test_an_end_loop_without_a_start_loop_says_so():
    from nodes.library.loops import find_start

    class Graph:
        def get_node(self, node_id):
            return {
                "e": {"class_type": "EndLoop", "inputs": {"output_value": ["n", 0]}},
                "n": {"class_type": "Num", "inputs": {"value": 1}},
            }[node_id]

    with pytest.raises(ValueError, match="End Loop e does not belong to a Start Loop"):
        find_start(Graph(), "e")


def test_start_loop_refuses_zero_iterations_and_a_zero_step():
    with pytest.raises(ValueError, match="no iteration"):
        _node("StartLoop").execute(["simple"], **{"mode.num_iterations": [0]})
    with pytest.raises(ValueError, match="step must not be 0"):
        _node("StartLoop").execute(["For"], **{"mode.step": [0]})


# --- latent cut (recorded from ComfyUI 0.10.0), crop and bounding box ------------------------------------------


def _latent_cut_cases():
    spec = importlib.util.spec_from_file_location("record_today", REPO / "scripts" / "record_comfyui_today_nodes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LATENT_CUT_CASES


@pytest.mark.parametrize("name, dim, size", _latent_cut_cases())
def test_latent_cut_to_batch_equals_comfyui_0_10(name, dim, size):
    x = _recorder_inputs()
    ours = _node("LatentCutToBatch").execute({"samples": x[name]}, dim, size)[0]["samples"]
    theirs = FIXTURE["latent_cut"][f"{name}-{dim}-{size}"]
    assert list(ours.shape) == theirs["shape"]
    assert ours.flatten().tolist() == theirs["values"]


async def test_crop_image_crops_to_the_bounding_box_and_shows_it(run):
    prompt = {
        "b": {"class_type": "PrimitiveBoundingBox", "inputs": {"x": 2, "y": 1, "width": 3, "height": 50}},
        "i": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 6, "batch_size": 1, "color": 0}},
        "c": {"class_type": "ImageCropV2", "inputs": {"image": ["i", 0], "crop_region": ["b", 0]}},
        "s": {"class_type": "GetImageSize", "inputs": {"image": ["c", 0]}},
        "k": {"class_type": "Keep", "inputs": {"value": ["s", 0]}},
        "k2": {"class_type": "Keep", "inputs": {"value": ["s", 1]}},
    }
    outputs = await run(prompt)
    assert (outputs["k"], outputs["k2"]) == ({"values": [3]}, {"values": [5]})  # the height stops at the image
    assert len(outputs["c"]["images"]) == 1 and outputs["c"]["images"][0]["type"] == "temp"


def test_crop_pulls_a_corner_past_the_image_back_inside():
    from nodes.library.crop import crop

    image = torch.arange(4 * 5, dtype=torch.float32).reshape(1, 4, 5, 1)
    assert crop(image, {"x": 9, "y": 9, "width": 2, "height": 2}).flatten().tolist() == [19.0]


@pytest.mark.parametrize(
    "color, expected",
    [
        ("#ff8000", (0xFF8000, "#ff8000", 1.0)),
        ("#00000080", (0, "#000000", 128 / 255)),
        ("#FFFFFF", (16777215, "#FFFFFF", 1.0)),
    ],
)
def test_color_picker(color, expected):
    assert _node("ColorToRGBInt").execute(color) == expected


@pytest.mark.parametrize("color", ["ff8000", "#ff80", "#gg0000", "#ff800000ff"])
def test_color_picker_names_a_bad_color(color):
    with pytest.raises(ValueError, match="not a colour in the format #RRGGBB"):
        _node("ColorToRGBInt").execute(color)


async def test_painter_lays_the_painting_over_the_background_and_masks_what_was_painted(run, tmp_path):
    from PIL import Image

    from nodes.workspace import active

    painting = Image.new("RGBA", (4, 2), (0, 0, 0, 0))
    painting.putpixel((1, 0), (255, 0, 0, 255))
    painting.putpixel((2, 1), (0, 0, 255, 128))
    (active().input_dir / "painter").mkdir(parents=True, exist_ok=True)
    painting.save(active().input_dir / "painter" / "p.png")
    prompt = {
        "i": {"class_type": "EmptyImage", "inputs": {"width": 4, "height": 2, "batch_size": 1, "color": 0x0000FF}},
        "p": {
            "class_type": "Painter",
            "inputs": {
                "mask": "painter/p.png [input]",
                "width": 64,
                "height": 64,
                "bg_color": "#00ff00",
                "image": ["i", 0],
            },
        },
        "k": {"class_type": "Keep", "inputs": {"value": ["p", 1]}},
    }
    outputs = await run(prompt)
    coverage = outputs["k"]["values"][0]
    assert coverage.shape == (1, 2, 4) and coverage[0, 0, 1] == 1.0 and abs(coverage[0, 1, 2] - 128 / 255) < 1e-6
    image, _ = _node("Painter").execute("painter/p.png [input]", 4, 2, "#00ff00")["result"]
    assert image[0, 0, 1].tolist() == [1.0, 0.0, 0.0]  # painted red
    assert image[0, 0, 0].tolist() == [0.0, 1.0, 0.0]  # the green background
    assert torch.allclose(image[0, 1, 2], torch.tensor([0.0, 127 / 255, 128 / 255]), atol=1e-6)  # half blue over green


def test_painter_without_a_painting_gives_the_base_and_an_empty_mask():
    base = torch.rand(2, 3, 5, 3)
    image, mask = _node("Painter").execute("", 64, 64, image=base)["result"]
    assert torch.equal(image, base[:1]) and mask.shape == (1, 3, 5) and not mask.any()


def test_painter_names_a_missing_painting():
    with pytest.raises(FileNotFoundError, match="'gone.png' is not in the input folder"):
        _node("Painter").execute("gone.png", 64, 64)


# --- Create Bounding Boxes (newer than 0.10.0: semantics read from the newest source) --------------------------

DRAWN = [
    {
        "x": 100,
        "y": 50,
        "width": 200,
        "height": 100,
        "metadata": {"type": "text", "text": "SALE", "desc": "red headline", "palette": ["#ff0000", "#00ff00"]},
    },
    {"x": 0, "y": 0, "width": 400, "height": 200, "metadata": {"type": "obj", "desc": "a shop"}},
]


def test_create_bounding_boxes_gives_pixel_boxes_elements_and_a_preview():
    out = _node("CreateBoundingBoxes").execute(400, 200, editor_state=DRAWN)
    preview, frame, elements = out["result"]
    assert preview.shape == (1, 200, 400, 3) and out["ui"] == {"dims": [400, 200]}
    assert frame == [[{"x": 100, "y": 50, "width": 200, "height": 100}, {"x": 0, "y": 0, "width": 400, "height": 200}]]
    assert elements == [
        {
            "type": "text",
            "bbox": [250, 250, 750, 750],
            "text": "SALE",
            "desc": "red headline",
            "color_palette": ["#FF0000", "#00FF00"],
        },
        {"type": "obj", "bbox": [0, 0, 1000, 1000], "desc": "a shop"},
    ]
    # the box's outline is drawn in its first palette colour
    assert preview[0, 100, 100].tolist() == [1.0, 0.0, 0.0]


def test_an_upstream_value_replaces_the_drawn_boxes_until_it_changes():
    node = _node("CreateBoundingBoxes")
    elements = json.dumps([{"type": "obj", "bbox": [0, 0, 500, 500], "desc": "left top"}])
    _, frame, _ = node.execute(400, 200, editor_state=DRAWN, bboxes=elements)["result"]
    assert frame == [[{"x": 0, "y": 0, "width": 200, "height": 100}]]
    taken = [
        {
            "x": 0,
            "y": 0,
            "width": 200,
            "height": 100,
            "metadata": {"type": "obj", "text": "", "desc": "left top", "palette": []},
        }
    ]
    _, frame, _ = node.execute(400, 200, editor_state=DRAWN, bboxes=elements, last_incoming=taken)["result"]
    assert frame[0][0] == {"x": 100, "y": 50, "width": 200, "height": 100}  # the same value again: edits stand


@pytest.mark.parametrize(
    "bboxes, message",
    [
        ("{not json", "not valid JSON"),
        (5, "not int"),
        ([{"bbox": [1, 2]}], "items must be boxes"),
        ([{"bbox": [1, 2, "x", 4]}], "four numbers"),
    ],
)
def test_create_bounding_boxes_names_what_is_wrong_with_the_input(bboxes, message):
    with pytest.raises(ValueError, match=message):
        _node("CreateBoundingBoxes").execute(400, 200, bboxes=bboxes)


# --- Crop Image to Mask (newer than 0.10.0: semantics read from the newest source) -----------------------------


def _subject(h: int = 40, w: int = 60) -> tuple[torch.Tensor, torch.Tensor]:
    image = torch.zeros(1, h, w, 3)
    image[0, 10:20, 20:40] = torch.tensor([1.0, 0.0, 0.0])  # a red 20x10 subject
    mask = torch.zeros(1, h, w)
    mask[0, 10:20, 20:40] = 1.0
    return image, mask


def test_crop_to_mask_centres_the_subject_on_the_background_at_the_output_size():
    torch.set_num_threads(1)
    image, mask = _subject()
    out = _node("ImageCropToMask").execute(image, mask, 64, 64, 1.0, 0, "#0000ff")[0]
    assert out.shape == (1, 64, 64, 3)
    # the box is the subject's width (20) squared: a 20x20 crop whose middle band is the subject
    assert torch.allclose(out[0, 32, 32], torch.tensor([1.0, 0.0, 0.0]), atol=0.02)
    assert torch.allclose(out[0, 4, 32], torch.tensor([0.0, 0.0, 1.0]), atol=0.02)  # above it: background


def test_crop_to_mask_reads_an_inverted_mask_the_right_way_round():
    torch.set_num_threads(1)
    image, mask = _subject()
    mask[0, 8:32, 12:48] = 1.0  # the subject covers the centre: its inversion has a set border, an unset centre
    normal = _node("ImageCropToMask").execute(image, mask, 64, 64, 1.0, 0, "#000000")[0]
    inverted = _node("ImageCropToMask").execute(image, 1.0 - mask, 64, 64, 1.0, 0, "#000000")[0]
    assert torch.allclose(normal, inverted)


def test_crop_to_mask_names_a_mask_count_that_does_not_fit():
    image, mask = _subject()
    with pytest.raises(ValueError, match="2 masks for 3 images"):
        _node("ImageCropToMask").execute(image.repeat(3, 1, 1, 1), mask.repeat(2, 1, 1), 64, 64, 1.0, 0, "#000000")


def test_image_histogram_counts_the_first_images_levels():
    image = torch.zeros(2, 2, 2, 3)
    image[0, 0, 0] = torch.tensor([1.0, 0.5, 0.0])  # levels 255, 127 (truncated), 0
    image[1] = 1.0  # the second image is not counted
    rgb, lum, red, green, blue = _node("ImageHistogram").execute(image)
    assert len(rgb) == len(lum) == 256 and sum(red) == sum(green) == sum(blue) == sum(lum) == 4
    assert (red[255], red[0], green[127], green[0], blue[0]) == (1, 3, 1, 3, 4)
    assert rgb[0] == (3 + 3 + 4) // 3
    assert lum[int((0.2126 + 0.7152 * 0.5) * 255)] == 1 and lum[0] == 3


# --- tiles and latent size (newer than 0.10.0: semantics read from the newest source) -------------------------


def test_tile_grid_steps_by_the_tile_less_the_overlap_and_ends_at_the_edges():
    from nodes.library.tiles import tile_grid

    assert tile_grid(250, 100, 100, 100, 20) == [(0, 0, 100, 100), (80, 0, 180, 100), (150, 0, 250, 100)]
    assert tile_grid(100, 100, 100, 100, 0) == [(0, 0, 100, 100)]
    # an overlap larger than three quarters of a tile still steps a quarter
    assert [t[0] for t in tile_grid(200, 64, 64, 64, 60)] == [0, 16, 32, 48, 64, 80, 96, 112, 128, 136]


@pytest.mark.parametrize("overlap", [0, 24])
async def test_split_into_tiles_then_merge_gives_the_image_back(run, overlap):
    image = torch.rand(1, 150, 230, 3, generator=torch.Generator().manual_seed(5))
    tiles = _node("SplitImageToTileList").execute(image, 100, 80, overlap)[0]
    assert all(t.shape == (1, 80, 100, 3) for t in tiles)
    merged = _node("ImageMergeTileList").execute(tiles, [230], [150], [overlap])[0]
    torch.testing.assert_close(merged, image, atol=1e-5, rtol=0)


async def test_the_nodes_after_split_run_once_per_tile(run):
    prompt = {
        "i": {"class_type": "EmptyImage", "inputs": {"width": 200, "height": 64, "batch_size": 1, "color": 0}},
        "t": {
            "class_type": "SplitImageToTileList",
            "inputs": {"image": ["i", 0], "tile_width": 64, "tile_height": 64, "overlap": 0},
        },
        "s": {"class_type": "GetImageSize", "inputs": {"image": ["t", 0]}},
        "k": {"class_type": "Keep", "inputs": {"value": ["s", 0]}},
    }
    assert (await run(prompt))["k"] == {"values": [64, 64, 64, 64]}


@pytest.mark.parametrize("shape, expected", [((2, 4, 8, 12), (12, 8, 1, 2)), ((1, 16, 5, 8, 6), (6, 8, 5, 1))])
def test_get_latent_size(shape, expected):
    assert _node("GetLatentSize").execute({"samples": torch.zeros(shape)}) == expected
