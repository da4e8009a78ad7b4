"""The V3 schema as today's ComfyUI defines it: dynamic types (MatchType, DynamicCombo, Autogrow), the
/object_info shape they produce, their validation and execution, and the types and options packs use."""

from __future__ import annotations

import json

import pytest

from comfy_bridge.validation import validate_prompt


def _io():
    from comfy_api.latest import io

    return io


def _dyn_math():
    io = _io()

    class DynMath(io.ComfyNode):
        """x passes through a MatchType; `op` picks its own inputs; `extra` grows v0, v1, ..."""

        @classmethod
        def define_schema(cls):
            t = io.MatchType.Template("T", [io.Float, io.Int])
            return io.Schema(
                node_id="DynMath",
                category="test",
                search_aliases=["maths"],
                inputs=[
                    io.MatchType.Input("x", template=t),
                    io.DynamicCombo.Input(
                        "op",
                        options=[
                            io.DynamicCombo.Option("add", [io.Float.Input("amount", default=1.0, min=-5.0, max=5.0)]),
                            io.DynamicCombo.Option("none", []),
                        ],
                    ),
                    io.Autogrow.Input(
                        "extra", template=io.Autogrow.TemplatePrefix(io.Float.Input("v"), prefix="v", min=1, max=3)
                    ),
                ],
                outputs=[io.MatchType.Output(t, id="same"), io.Float.Output("total", tooltip="the sum")],
            )

        @classmethod
        def execute(cls, x, op, extra):
            added = op["amount"] if op["op"] == "add" else 0.0
            return io.NodeOutput(x, x + added + sum(extra.values()))

    return DynMath


@pytest.fixture
def dyn_registry(registry):
    registry.add_custom({"DynMath": _dyn_math()}, None, "custom_nodes.dynpack")
    return registry


def test_object_info_of_dynamic_types(dyn_registry):
    info = json.loads(json.dumps(dyn_registry.node_info("DynMath")))
    assert list(info) == [
        "input",
        "input_order",
        "is_input_list",
        "output",
        "output_is_list",
        "output_name",
        "output_tooltips",
        "output_matchtypes",
        "name",
        "display_name",
        "description",
        "python_module",
        "category",
        "output_node",
        "deprecated",
        "experimental",
        "dev_only",
        "api_node",
        "price_badge",
        "search_aliases",
        "essentials_category",
        "has_intermediate_output",
    ]
    req = info["input"]["required"]
    assert req["x"] == ["COMFY_MATCHTYPE_V3", {"template": {"template_id": "T", "allowed_types": "FLOAT,INT"}}]
    assert req["op"] == [
        "COMFY_DYNAMICCOMBO_V3",
        {
            "options": [
                {
                    "key": "add",
                    "inputs": {"required": {"amount": ["FLOAT", {"default": 1.0, "min": -5.0, "max": 5.0}]}},
                },
                {"key": "none", "inputs": {"required": {}}},
            ]
        },
    ]
    assert req["extra"] == [
        "COMFY_AUTOGROW_V3",
        {
            "template": {
                "input": {"required": {"v": ["FLOAT", {"forceInput": True}]}},
                "prefix": "v",
                "min": 1,
                "max": 3,
            }
        },
    ]
    assert info["output"] == ["COMFY_MATCHTYPE_V3", "FLOAT"]
    assert info["output_name"] == ["same", "total"] and info["output_tooltips"] == [None, "the sum"]
    assert info["output_matchtypes"] == ["T", None] and info["search_aliases"] == ["maths"]
    assert info["python_module"] == "custom_nodes.dynpack" and info["dev_only"] is False


async def test_dynamic_inputs_validate_and_reach_execute_nested(dyn_registry, run):
    prompt = {
        "1": {"class_type": "Const", "inputs": {"value": 2.0}},
        "2": {"class_type": "Const", "inputs": {"value": 0.5}},
        "3": {
            "class_type": "DynMath",
            "inputs": {"x": ["1", 0], "op": "add", "op.amount": 3.0, "extra.v0": ["2", 0], "extra.v1": ["2", 0]},
        },
        "4": {"class_type": "Output", "inputs": {"value": ["3", 1]}},
        "5": {"class_type": "Output", "inputs": {"value": ["3", 0]}},
    }
    executor = await run(prompt)
    outputs = executor.history_result["outputs"]
    assert outputs["4"] == {"values": [2.0 + 3.0 + 0.5 + 0.5]} and outputs["5"] == {"values": [2.0]}


async def test_dynamic_inputs_follow_comfyui_validation_rules(dyn_registry):
    base = {
        "1": {"class_type": "Const", "inputs": {"value": 2.0}},
        "4": {"class_type": "Output", "inputs": {"value": ["3", 1]}},
    }
    # The option's input is range-checked under its dotted id; the first grown input is required.
    prompt = base | {"3": {"class_type": "DynMath", "inputs": {"x": ["1", 0], "op": "add", "op.amount": 9.0}}}
    ok, _, _, node_errors = await validate_prompt(dyn_registry, "p", prompt, None)
    reasons = {(e["type"], e["details"]) for e in node_errors["3"]["errors"]}
    assert not ok and reasons == {("value_bigger_than_max", "op.amount"), ("required_input_missing", "v0")}
    # A MatchType socket takes any linked type; an option without inputs needs none.
    prompt = base | {"3": {"class_type": "DynMath", "inputs": {"x": ["1", 0], "op": "none", "extra.v0": ["1", 0]}}}
    assert (await validate_prompt(dyn_registry, "p", prompt, None))[0]


def test_schema_rules_and_options():
    io = _io()

    class Same(io.ComfyNode):
        @classmethod
        def define_schema(cls):
            # An output may share an input's id (Easy-Use's `easy pixels`: width/height in and out).
            return io.Schema(node_id="Same", inputs=[io.Int.Input("width")], outputs=[io.Int.Output("width")])

        @classmethod
        def execute(cls, width):
            return io.NodeOutput(width)

    assert Same.GET_SCHEMA().node_id == "Same" and Same.RETURN_NAMES == ["width"]

    class Twice(Same):
        @classmethod
        def define_schema(cls):
            return io.Schema(node_id="Twice", inputs=[io.Int.Input("a"), io.Int.Input("a")])

    with pytest.raises(ValueError, match=r"Input ids must be unique, but \['a'\] are not"):
        Twice.GET_SCHEMA()
    with pytest.raises(ValueError, match="either 'remote' or 'remote_combo'"):
        io.Combo.Input(
            "c",
            remote=io.RemoteOptions("/r", True),
            remote_combo=io.RemoteComboOptions("/r", io.RemoteItemSchema("id", "name")),
        )
    with pytest.raises(ValueError, match="'refresh' must be >= 128"):
        io.RemoteComboOptions("/r", io.RemoteItemSchema("id", "name"), refresh=5)
    with pytest.raises(ValueError, match="Allowed types must be a ComfyType"):
        io.MatchType.Template("T", [int])
    assert io.BoundingBox.Input("box").as_dict() == {
        "optional": False,
        "socketless": True,
        "default": {"x": 0, "y": 0, "width": 512, "height": 512},
    }
    assert io.MultiCombo.Input("m", ["a", "b"], chip=True).as_dict()["multi_select"] == {"chip": True}
    assert io.Float.Input("f", advanced=True, raw_link=True).as_dict() == {
        "optional": False,
        "advanced": True,
        "rawLink": True,
    }
    for name, io_type in {
        "Tracks": "TRACKS",
        "LatentUpscaleModel": "LATENT_UPSCALE_MODEL",
        "Color": "COLOR",
        "Autogrow": "COMFY_AUTOGROW_V3",
        "DynamicCombo": "COMFY_DYNAMICCOMBO_V3",
        "MatchType": "COMFY_MATCHTYPE_V3",
        "DynamicSlot": "COMFY_DYNAMICSLOT_V3",
        "BoundingBox": "BOUNDING_BOX",
        "ModelPatch": "MODEL_PATCH",
        "MultiType": "COMFY_MULTITYPED_V3",
    }.items():
        assert getattr(io, name).io_type == io_type
    assert io.Hidden.comfy_usage_source.value == "COMFY_USAGE_SOURCE"


def test_ui_save_helpers_write_comfyuis_files(tmp_path):
    import torch
    from comfy_api.latest import io, ui
    from PIL import Image as PILImage

    from nodes.workspace import active

    class Saver(io.ComfyNode):
        hidden = io.HiddenHolder(
            {io.Hidden.prompt: {"1": {"class_type": "Saver"}}, io.Hidden.extra_pnginfo: {"workflow": {"nodes": []}}}
        )

    images = torch.rand(2, 8, 8, 3)
    saved = ui.ImageSaveHelper.get_save_images_ui(images, "v3/pic", cls=Saver).as_dict()
    assert [r.filename for r in saved["images"]] == ["pic_00001_.png", "pic_00002_.png"]
    assert saved["images"][0] == {"filename": "pic_00001_.png", "subfolder": "v3", "type": "output"}
    with PILImage.open(active().output_dir / "v3" / "pic_00001_.png") as png:
        assert json.loads(png.text["prompt"]) == {"1": {"class_type": "Saver"}} and "workflow" in png.text
    anim = ui.ImageSaveHelper.get_save_animated_png_ui(images, "anim", Saver, fps=4.0, compress_level=1).as_dict()
    assert anim["animated"] == (True,)
    with PILImage.open(active().output_dir / anim["images"][0]["filename"]) as apng:
        assert apng.n_frames == 2
    webp = ui.ImageSaveHelper.get_save_animated_webp_ui(images, "anim", Saver, 4.0, True, 80, 4).as_dict()
    assert webp["images"][0]["filename"].endswith(".webp")
    audio = {"waveform": torch.zeros(1, 1, 800), "sample_rate": 8000}
    assert ui.AudioSaveHelper.get_save_audio_ui(audio, "snd", Saver).as_dict()["audio"][0]["filename"].endswith(".flac")
    assert ui.PreviewAudio(audio).as_dict()["audio"][0]["type"] == "temp"


async def test_lazy_grown_inputs_are_asked_for_by_their_ids(registry, run):
    import engine_nodes
    from comfy_api.latest import io

    class FirstOnly(io.ComfyNode):
        @classmethod
        def define_schema(cls):
            return io.Schema(
                node_id="FirstOnly",
                inputs=[
                    io.Autogrow.Input(
                        "vals",
                        template=io.Autogrow.TemplatePrefix(io.Float.Input("v", lazy=True), prefix="v", min=1, max=3),
                    )
                ],
                outputs=[io.Float.Output("first")],
            )

        @classmethod
        def check_lazy_status(cls, vals):
            # Unevaluated lazy inputs come as (None, id) pairs; the node answers with the ids it needs.
            value, key = vals["v0"]
            return [key] if value is None else []

        @classmethod
        def execute(cls, vals):
            return io.NodeOutput(vals["v0"])

    registry.add_custom({"FirstOnly": FirstOnly}, None, "custom_nodes.lazy")
    prompt = {
        "1": {"class_type": "Const", "inputs": {"value": 1.5}},
        "2": {"class_type": "Const", "inputs": {"value": 9.0}},
        "3": {"class_type": "FirstOnly", "inputs": {"vals.v0": ["1", 0], "vals.v1": ["2", 0]}},
        "4": {"class_type": "Output", "inputs": {"value": ["3", 0]}},
    }
    executor = await run(prompt)
    assert executor.history_result["outputs"]["4"] == {"values": [1.5]}
    assert engine_nodes.CALLS.count("Const") == 1  # the second grown input was never evaluated


DYNAMIC_PACK = """
from comfy_api.latest import ComfyExtension, io

class Pick(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        t = io.MatchType.Template("T")
        return io.Schema(node_id="PackPick", inputs=[
            io.DynamicCombo.Input("mode", options=[
                io.DynamicCombo.Option("first", []),
                io.DynamicCombo.Option("index", [io.Int.Input("i", default=0, min=0, max=9)])]),
            io.Autogrow.Input("items", template=io.Autogrow.TemplateNames(io.MatchType.Input("item", template=t),
                                                                           names=["a", "b", "c"], min=1))],
            outputs=[io.MatchType.Output(t, id="picked")])

    @classmethod
    async def execute(cls, mode, items):
        values = [v for v in items.values() if v is not None]
        return io.NodeOutput(values[0] if mode["mode"] == "first" else values[mode["i"]])

class Ext(ComfyExtension):
    async def get_node_list(self):
        return [Pick]

async def comfy_entrypoint():
    return Ext()
"""


async def test_a_v3_pack_with_dynamic_types_loads_and_runs(tmp_path, sink):
    import textwrap

    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.registry import build_registry
    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "w").create())
    (ws.root / "custom_nodes" / "dynpack.py").write_text(textwrap.dedent(DYNAMIC_PACK))
    (ws.root / "custom_nodes" / "show.py").write_text(
        textwrap.dedent("""
        class Show:
            @classmethod
            def INPUT_TYPES(cls):
                return {"required": {"text": ("STRING", {"forceInput": True})}}
            RETURN_TYPES = ()
            FUNCTION = "run"
            OUTPUT_NODE = True
            def run(self, text):
                return {"ui": {"text": [text]}}
        class Text:
            @classmethod
            def INPUT_TYPES(cls):
                return {"required": {"value": ("STRING", {})}}
            RETURN_TYPES = ("STRING",)
            FUNCTION = "run"
            def run(self, value):
                return (value,)
        NODE_CLASS_MAPPINGS = {"PackShow": Show, "PackText": Text}
    """)
    )
    registry = build_registry(ws)
    info = json.loads(json.dumps(registry.node_info("PackPick")))
    assert info["python_module"] == "custom_nodes.dynpack" and info["output_matchtypes"] == ["T"]
    assert info["input"]["required"]["items"][1]["template"]["names"] == ["a", "b", "c"]
    prompt = {
        "1": {"class_type": "PackText", "inputs": {"value": "x"}},
        "2": {"class_type": "PackText", "inputs": {"value": "y"}},
        "3": {
            "class_type": "PackPick",
            "inputs": {"mode": "index", "mode.i": 1, "items.a": ["1", 0], "items.b": ["2", 0]},
        },
        "4": {"class_type": "PackShow", "inputs": {"text": ["3", 0]}},
    }
    ok, error, outputs, node_errors = await validate_prompt(registry, "p", prompt, None)
    assert ok, (error, node_errors)
    executor = PromptExecutor(registry, sink)
    await executor.execute_async(prompt, "p", {"client_id": "c"}, outputs)
    assert executor.history_result["outputs"] == {"4": {"text": ["y"]}}


def test_hidden_usage_source_comes_from_extra_data():
    from comfy_api.latest import io

    from comfy_bridge.execution.node_call import get_input_data

    class ApiNode(io.ComfyNode):
        @classmethod
        def define_schema(cls):
            return io.Schema(node_id="ApiNode", inputs=[io.String.Input("s")], is_api_node=True)

        @classmethod
        def execute(cls, s):
            return io.NodeOutput()

    assert ApiNode.INPUT_TYPES()["hidden"] == {
        "auth_token_comfy_org": ("AUTH_TOKEN_COMFY_ORG",),
        "api_key_comfy_org": ("API_KEY_COMFY_ORG",),
        "comfy_usage_source": ("COMFY_USAGE_SOURCE",),
    }
    _, _, hidden = get_input_data({"s": "x"}, ApiNode, "1", extra_data={"comfy_usage_source": "comfy-cli"})
    assert hidden[io.Hidden.comfy_usage_source] == "comfy-cli"

    class V1Node:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {}, "hidden": {"source": "COMFY_USAGE_SOURCE"}}

    data, _, _ = get_input_data({}, V1Node, "1", extra_data={"comfy_usage_source": "comfyui-frontend"})
    assert data["source"] == ["comfyui-frontend"]
