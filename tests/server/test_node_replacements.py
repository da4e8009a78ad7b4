"""Node replacements as today's ComfyUI has them: GET /node_replacements in the shape web UI 1.58.1 reads
(its nodeReplacement store: {old class: [{new_node_id, old_node_id, old_widget_ids, input_mapping,
output_mapping}]}, the first entry offered), /features announcing it, packs registering through
ComfyAPI().node_replacement in on_load or a node_replacements.json, and POST /prompt running a prompt that
names a retired class as its successor (ComfyUI's apply_replacements before validation)."""

from __future__ import annotations

import json
import textwrap
from io import BytesIO

import pytest
from PIL import Image

from comfy_bridge import compat, node_replace
from comfy_bridge.compat.comfy_api.latest import ComfyAPI, ComfyAPISync, io
from comfy_bridge.custom_nodes import load_pack
from comfy_bridge.node_replace_builtin import BUILTIN
from comfy_bridge.registry import NodeRegistry, _core_nodes

from . import server_nodes
from .conftest import make_registry, wait_history

KEYS = {"new_node_id", "old_node_id", "old_widget_ids", "input_mapping", "output_mapping"}


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Each test starts from the built-in replacements only (the registry is process-wide)."""
    monkeypatch.setattr(node_replace, "_manager", None)


async def test_features_announce_it_and_the_route_answers_comfyui_builtins(make_client):
    core = _core_nodes()[0]
    client = await make_client(registry=make_registry(extra=core))
    features = await (await client.get("/api/features")).json()
    assert features["node_replacements"] is True
    r = await client.get("/api/node_replacements")
    assert r.status == 200 and r.content_type == "application/json"
    body = await r.json()
    # ComfyUI's nine, less those whose successor is not offered here (the web UI's swap would fail).
    assert set(node_replace.node_replace_manager().as_dict()) == {
        "ResizeImagesByLongerEdge",
        "ImageBatch",
        "ImageScaleBy",
        "T2IAdapterLoader",
        "Load3DAnimation",
        "Preview3DAnimation",
        "SDV_img2vid_Conditioning",
        "ConditioningAverage ",
        "GeminiNanoBanana2",
    }
    assert set(body) == {old for old, new, *_ in BUILTIN if new in core}
    assert {
        "ResizeImagesByLongerEdge",
        "ImageBatch",
        "ImageScaleBy",
        "T2IAdapterLoader",
        "ConditioningAverage ",
    } <= set(body)
    assert "GeminiNanoBanana2" not in body  # a paid API node, not offered
    for old, entries in body.items():
        assert entries and all(set(e) == KEYS and e["old_node_id"] == old for e in entries)
    assert body["ImageScaleBy"] == [
        {
            "new_node_id": "ResizeImageMaskNode",
            "old_node_id": "ImageScaleBy",
            "old_widget_ids": ["upscale_method", "scale_by"],
            "input_mapping": [
                {"new_id": "input", "old_id": "image"},
                {"new_id": "resize_type", "set_value": "scale by multiplier"},
                {"new_id": "resize_type.multiplier", "old_id": "scale_by"},
                {"new_id": "scale_method", "old_id": "upscale_method"},
            ],
            "output_mapping": None,
        }
    ]
    assert body["ResizeImagesByLongerEdge"][0]["output_mapping"] == [{"new_idx": 0, "old_idx": 0}]
    assert body["T2IAdapterLoader"][0]["output_mapping"] is None  # null, not [] (the UI tests `== null`)
    assert (await (await client.get("/node_replacements")).json()) == body
    stubs_only = await make_client()
    assert await (await stubs_only.get("/api/node_replacements")).json() == {}


async def test_packs_register_through_comfy_api_on_load_and_json(make_client, tmp_path):
    stand_in = server_nodes.StubImage  # the route lists a replacement only when its successor is offered
    client = await make_client(registry=make_registry(extra={"NewNode": stand_in, "AltNode": stand_in, "B": stand_in}))
    v3 = tmp_path / "v3pack"
    v3.mkdir()
    (v3 / "__init__.py").write_text(
        textwrap.dedent("""
        from comfy_api.latest import ComfyAPI, ComfyExtension, io

        class Ext(ComfyExtension):
            async def on_load(self):
                await ComfyAPI().node_replacement.register(io.NodeReplace(
                    new_node_id="NewNode", old_node_id="OldNode", old_widget_ids=["w"],
                    input_mapping=[{"new_id": "x", "old_id": "w"}], output_mapping=[{"new_idx": 0, "old_idx": 1}]))

            async def get_node_list(self):
                return []

        async def comfy_entrypoint():
            return Ext()
    """)
    )
    v1 = tmp_path / "v1pack"
    v1.mkdir()
    (v1 / "__init__.py").write_text("NODE_CLASS_MAPPINGS = {}\n")
    (v1 / "node_replacements.json").write_text(
        json.dumps(
            {
                "OldNode": [
                    {"new_node_id": "AltNode"},
                    {"new_node_id": "NewNode"},
                    "not an entry",
                    {"new_node_id": ""},
                ],
                "Broken": "not a list",
            }
        )
    )
    compat.import_as_comfyui_has()  # what load_custom_nodes does first: packs import comfy_api
    registry = NodeRegistry()
    assert await load_pack(registry, v3) and await load_pack(registry, v1)
    body = await (await client.get("/api/node_replacements")).json()
    assert [e["new_node_id"] for e in body["OldNode"]] == ["NewNode", "AltNode"]  # the pair once, order kept
    assert body["OldNode"][0]["output_mapping"] == [{"new_idx": 0, "old_idx": 1}]
    assert body["OldNode"][1]["old_node_id"] == "OldNode" and "Broken" not in body
    ComfyAPISync().node_replacement.register(io.NodeReplace(new_node_id="B", old_node_id="A"))
    assert "A" in await (await client.get("/api/node_replacements")).json()
    with pytest.raises(ValueError, match="old_node_id"):
        await ComfyAPI().node_replacement.register(io.NodeReplace(new_node_id="B", old_node_id=""))


async def test_malformed_replacements_file_is_skipped(tmp_path, caplog):
    (tmp_path / "node_replacements.json").write_text("{not json")
    manager = node_replace.NodeReplaceManager()
    assert manager.load_from_json(tmp_path, "pack") == 0 and manager.as_dict() == {}
    assert "not readable JSON" in caplog.text


async def test_prompt_with_a_retired_class_runs_as_its_successor(client):
    await ComfyAPI().node_replacement.register(
        io.NodeReplace(
            new_node_id="StubImage",
            old_node_id="StubImageOld",
            input_mapping=[{"new_id": "width", "old_id": "size"}, {"new_id": "note", "set_value": "carried"}],
            output_mapping=[{"new_idx": 0, "old_idx": 1}],
        )
    )
    prompt = {
        "1": {"class_type": "StubImageOld", "inputs": {"size": 12, "dropped": 1}},
        "2": {"class_type": "StubSave", "inputs": {"images": ["1", 1], "filename_prefix": "swapped"}},
    }
    r = await client.post("/api/prompt", json={"prompt": prompt})
    assert r.status == 200, await r.text()
    entry = await wait_history(client, (await r.json())["prompt_id"])
    assert entry["status"]["status_str"] == "success", entry["status"]
    stored = entry["prompt"][2]
    assert stored["1"]["class_type"] == "StubImage" and stored["1"]["inputs"] == {"width": 12, "note": "carried"}
    assert stored["2"]["inputs"]["images"] == ["1", 0]
    image = await client.get("/api/view", params={"filename": "swapped.png", "type": "output"})
    assert Image.open(BytesIO(await image.read())).size == (12, 8)  # the old `size` reached `width`


async def test_no_swap_when_the_old_class_is_offered_or_the_new_one_is_not():
    manager = node_replace.NodeReplaceManager()
    manager.register(
        io.NodeReplace(new_node_id="New", old_node_id="Old", input_mapping=[{"new_id": "b", "old_id": "a"}])
    )
    manager.register(io.NodeReplace(new_node_id="Gone", old_node_id="Old2"))
    prompt = {
        "1": {"class_type": "Old", "inputs": {"a": 1}},
        "2": {"class_type": "Old2", "inputs": {"a": 1}},
        "3": {"class_type": "Old", "inputs": {}},
    }  # its optional input left out: stays out
    manager.apply_replacements(prompt, offered={"Old", "New"})
    assert prompt["1"]["class_type"] == "Old" and prompt["2"]["class_type"] == "Old2"
    manager.apply_replacements(prompt, offered={"New"})
    assert prompt["1"] == {"class_type": "New", "inputs": {"b": 1}, "_meta": {}}
    assert prompt["2"]["class_type"] == "Old2"  # its successor is not offered: left for validation to name
    assert prompt["3"]["inputs"] == {}


async def test_a_replaced_reader_of_a_replaced_node_keeps_the_remapped_link():
    manager = node_replace.NodeReplaceManager()
    manager.register(io.NodeReplace(new_node_id="A2", old_node_id="A", output_mapping=[{"new_idx": 0, "old_idx": 2}]))
    manager.register(io.NodeReplace(new_node_id="B2", old_node_id="B", input_mapping=[{"new_id": "y", "old_id": "x"}]))
    prompt = {"2": {"class_type": "B", "inputs": {"x": ["1", 2]}}, "1": {"class_type": "A", "inputs": {}}}
    manager.apply_replacements(prompt, offered={"A2", "B2"})
    assert prompt["2"]["inputs"] == {"y": ["1", 0]}
