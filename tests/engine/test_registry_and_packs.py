"""/object_info shapes (V1 and V3) and custom node pack loading."""

from __future__ import annotations

import json
import textwrap

from comfy_bridge.registry import build_registry
from nodes.workspace import Workspace, activate


def test_v1_node_info_shape(registry):
    """As today's ComfyUI's server.py builds a plain class's entry (read at Comfy-Org/ComfyUI 002c3fb9): the
    input-list and intermediate-output flags always, search aliases always (empty when the class has none)."""
    info = registry.node_info("Const")
    assert list(info) == [
        "input",
        "input_order",
        "is_input_list",
        "output",
        "output_is_list",
        "output_name",
        "name",
        "display_name",
        "description",
        "python_module",
        "category",
        "output_node",
        "has_intermediate_output",
        "search_aliases",
    ]
    assert info["display_name"] == "Constant" and info["python_module"] == "nodes" and info["category"] == "sd"
    assert info["output_is_list"] == [False] and info["output_name"] == ("FLOAT",)
    assert info["is_input_list"] is False and info["has_intermediate_output"] is False and info["search_aliases"] == []
    out = registry.node_info("Output")
    assert out["output_node"] is True and out["input_order"] == {"required": ["value"], "hidden": ["unique_id"]}


def test_v1_node_info_reads_todays_class_flags(registry):
    class Flagged:
        INPUT_IS_LIST = True
        HAS_INTERMEDIATE_OUTPUT = 1
        DEV_ONLY = True
        SEARCH_ALIASES = ["alias"]
        ESSENTIALS_CATEGORY = "Basics"
        RETURN_TYPES = ("INT",)
        FUNCTION = "run"

        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {}}

    registry.classes["Flagged"] = Flagged
    info = registry.node_info("Flagged")
    assert info["is_input_list"] is True and info["has_intermediate_output"] is True and info["dev_only"] is True
    assert info["search_aliases"] == ["alias"] and info["essentials_category"] == "Basics"
    assert list(info)[-3:] == ["dev_only", "search_aliases", "essentials_category"]


def test_v3_node_info_shape(registry):
    info = json.loads(json.dumps(registry.node_info("V3Scale")))
    assert info["input"] == {
        "required": {
            "value": ["FLOAT", {"default": 1.0, "min": -5.0, "max": 5.0}],
            "mode": ["COMBO", {"multiselect": False, "options": ["double", "triple"]}],
        },
        "hidden": {"unique_id": ["UNIQUE_ID"]},
    }
    assert info["output"] == ["FLOAT"] and info["output_name"] == ["scaled"] and info["output_tooltips"] == [None]
    assert (info["display_name"], info["category"], info["deprecated"], info["api_node"]) == (
        "Scale (V3)",
        "test",
        False,
        False,
    )
    v3_out = registry.node_info("V3AsyncOutput")
    assert v3_out["display_name"] is None and v3_out["output_node"] is True
    assert v3_out["input"]["hidden"] == {"prompt": ("PROMPT",), "extra_pnginfo": ("EXTRA_PNGINFO",)}


PACK_V1 = """
from comfy.comfy_types import IO, ComfyNodeABC
from comfy.utils import ProgressBar
from comfy_execution.graph_utils import GraphBuilder, is_link
from comfy_execution.graph import ExecutionBlocker
from comfy_api.v0_0_2 import ComfyAPI, ComfyAPISync
import folder_paths, server, nodes

class Echo(ComfyNodeABC):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": (IO.ANY, {})}}
    RETURN_TYPES = (IO.ANY,)
    FUNCTION = "run"
    def run(self, value):
        return (value,)

NODE_CLASS_MAPPINGS = {"PackEcho": Echo, "Const": Echo}
NODE_DISPLAY_NAME_MAPPINGS = {"PackEcho": "Echo (pack)"}
WEB_DIRECTORY = "./js"
"""

PACK_V3 = """
from comfy_api.latest import ComfyExtension, io

class Hello(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="PackHello", display_name="Hello", inputs=[io.String.Input("text")],
                         outputs=[io.String.Output()])
    @classmethod
    def execute(cls, text):
        return io.NodeOutput(text + "!")

class Ext(ComfyExtension):
    async def get_node_list(self):
        return [Hello]

async def comfy_entrypoint():
    return Ext()
"""


def test_packs_load_v1_v3_web_dirs_and_failures(tmp_path):
    ws = activate(Workspace(tmp_path / "w").create())
    custom = ws.root / "custom_nodes"
    (custom / "v1pack" / "js").mkdir(parents=True)
    (custom / "v1pack" / "__init__.py").write_text(textwrap.dedent(PACK_V1))
    (custom / "v3pack.py").write_text(textwrap.dedent(PACK_V3))
    (custom / "broken.py").write_text("raise RuntimeError('broken pack')\n")
    (custom / "empty.py").write_text("x = 1\n")
    (custom / "off.py.disabled").write_text("raise SystemExit\n")
    (custom / "notes.txt").write_text("not a pack")
    registry = build_registry(ws)
    assert registry.display_names["PackEcho"] == "Echo (pack)"
    assert registry.node_info("PackEcho")["python_module"] == "custom_nodes.v1pack"
    assert registry.node_info("PackHello")["python_module"] == "custom_nodes.v3pack"
    assert registry.web_directories["v1pack"] == (custom / "v1pack" / "js").resolve()
    failed = {p.rsplit("/", 1)[-1] for p in registry.import_failures}
    assert failed == {"broken.py", "empty.py"}
    assert "broken pack" in next(v for k, v in registry.import_failures.items() if k.endswith("broken.py"))


def test_packs_cannot_replace_core_nodes_but_replace_each_other(registry):
    core = registry.classes["Const"]
    first, second = type("First", (), {}), type("Second", (), {})
    registry.add_custom({"Const": first, "Shared": first}, None, "custom_nodes.a")
    registry.add_custom({"Shared": second}, None, "custom_nodes.b")
    assert registry.classes["Const"] is core
    assert registry.classes["Shared"] is second and second.RELATIVE_PYTHON_MODULE == "custom_nodes.b"


async def test_loaded_v3_pack_executes(tmp_path, sink):
    from comfy_bridge.execution import PromptExecutor
    from comfy_bridge.validation import validate_prompt

    ws = activate(Workspace(tmp_path / "w").create())
    (ws.root / "custom_nodes" / "v3pack.py").write_text(textwrap.dedent(PACK_V3))
    (ws.root / "custom_nodes" / "out.py").write_text(
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
        NODE_CLASS_MAPPINGS = {"PackShow": Show}
    """)
    )
    registry = build_registry(ws)
    prompt = {
        "1": {"class_type": "PackHello", "inputs": {"text": "hi"}},
        "2": {"class_type": "PackShow", "inputs": {"text": ["1", 0]}},
    }
    ok, _, outputs, _ = await validate_prompt(registry, "p", prompt, None)
    executor = PromptExecutor(registry, sink)
    await executor.execute_async(prompt, "p", {"client_id": "c"}, outputs)
    assert executor.history_result["outputs"] == {"2": {"text": ["hi!"]}}
