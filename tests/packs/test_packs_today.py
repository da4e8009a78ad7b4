"""The packs-today harness (scripts/packs_today.py): docs/packs.md's table, figures and pack lists are the
committed result file's, the result covers exactly the packs the list file chooses and leaves out, each
importing pack has a recorded case that ran one of its own nodes, and the probe itself imports a pack,
counts its nodes and runs one of them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("packs_today", REPO / "scripts" / "packs_today.py")
packs_today = importlib.util.module_from_spec(spec)
spec.loader.exec_module(packs_today)


def result() -> dict:
    return json.loads(packs_today.RESULT.read_text())


def docs_block() -> str:
    text = packs_today.DOCS.read_text()
    start, end = text.index(packs_today.TABLE_START), text.index(packs_today.TABLE_END)
    return text[start + len(packs_today.TABLE_START) : end].strip("\n") + "\n"


def test_the_docs_block_is_the_result_files():
    assert docs_block() == packs_today.docs_block(result())


def test_the_result_covers_the_chosen_packs_and_names_those_left_out():
    packs, left_out = packs_today.read_list()
    data = result()
    assert [(p["repo"], p["commit"]) for p in data["packs"]] == [(p["repo"], p["commit"]) for p in packs]
    assert data["left_out"] == left_out
    assert len(packs) == 60 and len({p["repo"] for p in packs}) == 60
    assert data["summary"] == packs_today.summary(data["packs"])
    block = docs_block()
    for item in left_out:
        assert item["repo"] in block and item["why"] in block


def test_each_case_ran_a_node_of_its_pack():
    data = result()
    for pack in data["packs"]:
        cases = [c for c in pack.get("cases", []) if c["ok"]]
        for case in cases:  # the node run is one the pack declares, and its outputs were recorded
            assert case["prompt"]["node"]["class_type"] == case["node"]
            assert "outputs" in case
        # a pack that imported with nodes tried its candidates in order until one ran, none after it
        oks = [a["ok"] for a in pack.get("attempts", [])]
        assert oks == [False] * (len(oks) - 1) + [True] if cases else not any(oks), pack["folder"]


def test_build_case_fills_widgets_and_feeds_images():
    info = {
        "input": {
            "required": {
                "image": ("IMAGE",),
                "n": ("INT", {"default": 3, "min": 1}),
                "mode": (["a", "b"],),
                "v3": ("COMBO", {"options": ["x"]}),
                "text": ("STRING", {"multiline": True}),
                "flag": ("BOOLEAN", {}),
            },
            "optional": {"model": ("MODEL",)},
        }
    }
    prompt = packs_today.build_case("Node", info)
    assert prompt["node"]["inputs"] == {
        "image": ["feed_image", 0],
        "n": 3,
        "mode": "a",
        "v3": "x",
        "text": "a photo of a cat",
        "flag": False,
    }
    assert prompt["feed_image"]["class_type"] == "EmptyImage"
    assert packs_today.build_case("Needs", {"input": {"required": {"face": ("FACEANALYSIS",)}}}) is None
    assert packs_today.build_case("Empty", {"input": {"required": {"choice": ([],)}}}) is None


def test_models_and_conditioning_come_from_the_demo_checkpoint():
    prompt = packs_today.build_case(
        "Apply", {"input": {"required": {"model": ("MODEL",), "cond": ("CONDITIONING",), "vae": ("VAE",)}}}
    )
    assert prompt["node"]["inputs"] == {"model": ["feed_ckpt", 0], "cond": ["feed_cond", 0], "vae": ["feed_ckpt", 2]}
    assert prompt["feed_ckpt"]["inputs"] == {"ckpt_name": "sd1-tiny.safetensors"}
    assert prompt["feed_cond"]["inputs"]["clip"] == ["feed_ckpt", 1]


def test_v3_type_names_are_filled_like_plain_ones():
    """V3 schemas list their types as str subclasses (matching "*" in validation); they are not any-type names."""
    from comfy_bridge.compat.comfy_api.latest._io import _StringIOType

    info = {"input": {"required": {"image": (_StringIOType("IMAGE"), {}), "n": (_StringIOType("INT"), {"default": 2})}}}
    assert packs_today.build_case("V3", info)["node"]["inputs"] == {"image": ["feed_image", 0], "n": 2}


class AnyType(str):
    """The "any type" name packs declare: equal to every type, and (as Easy-Use's) unhashable."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = None


def test_an_any_type_input_is_not_filled():
    assert packs_today.build_case("Show", {"input": {"required": {"anything": (AnyType("*"), {})}}}) is None


def test_the_probe_imports_a_pack_and_runs_one_of_its_nodes(tmp_path):
    pack = tmp_path / "ws" / "custom_nodes" / "tiny_pack"
    pack.mkdir(parents=True)
    (pack / "__init__.py").write_text(
        textwrap.dedent("""
        class LoadThing:
            @classmethod
            def INPUT_TYPES(cls):
                return {"required": {"name": ("STRING", {"default": "x"})}}
            RETURN_TYPES = ("STRING",)
            FUNCTION = "run"
            def run(self, name):
                raise FileNotFoundError("no model " + name)
        class Brighter:
            @classmethod
            def INPUT_TYPES(cls):
                return {"required": {"image": ("IMAGE",), "amount": ("FLOAT", {"default": 0.25})}}
            RETURN_TYPES = ("IMAGE",)
            FUNCTION = "run"
            def run(self, image, amount):
                return (image + amount,)
        class Broken:
            @classmethod
            def INPUT_TYPES(cls):
                raise RuntimeError("cannot describe")
        NODE_CLASS_MAPPINGS = {"LoadThing": LoadThing, "Brighter": Brighter, "Broken": Broken,
                               "EmptyImage": Brighter}
    """)
    )
    out = tmp_path / "probe.json"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "packs_today.py"),
            "probe",
            "--workspace",
            str(tmp_path / "ws"),
            "--pack",
            "tiny_pack",
            "--out",
            str(out),
        ],
        check=True,
        timeout=600,
        cwd=tmp_path,
    )
    got = json.loads(out.read_text())
    # EmptyImage is a core name (not the pack's to replace, as in ComfyUI); Broken is declared but unlisted.
    assert got["core_names"] == ["EmptyImage"]
    assert (got["nodes_declared"], got["nodes_listed"], got["nodes_missing"]) == (3, 2, ["Broken"])
    assert got["imported"] is False and got["finished"] is True
    assert [a["node"] for a in got["attempts"]] == ["Brighter"]  # loaders are tried last
    case = got["cases"][0]
    assert case["node"] == "Brighter" and case["outputs"][0][0]["tensor"] == [1, 64, 64, 3]
