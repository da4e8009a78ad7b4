"""Save SVG writes what upstream ComfyUI 0.10.0's writes: the same file names, subfolders and UI entries, and the
same file text with the prompt and workflow embedded after every opening <svg> tag
(tests/nodes/fixtures/comfyui_save_svg.json, recorded by scripts/record_comfyui_save_svg.py)."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest

from comfy_bridge import compat

compat.install()
import nodes  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_save_svg.json").read_text(encoding="utf-8"))


def _recorder():
    spec = importlib.util.spec_from_file_location("record_save_svg", REPO / "scripts" / "record_comfyui_save_svg.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def output_dir(tmp_path):
    from nodes.workspace import Workspace, activate

    return Path(activate(Workspace(tmp_path / "ws").create()).output_dir)


@pytest.mark.parametrize("case", _recorder().CASES, ids=lambda c: c[0])
def test_save_svg_writes_what_comfyui_0_10_writes(case, output_dir):
    from comfy_api.latest import io as comfy_io

    name, texts, prefix, prompt, extra = case
    svg = comfy_io.SVG.Type([io.BytesIO(t.encode("utf-8")) for t in texts])
    ui = nodes.NODE_CLASS_MAPPINGS["SaveSVGNode"]().execute(svg, prefix, prompt=prompt, extra_pnginfo=extra)["ui"]
    expected = FIXTURE["cases"][name]
    assert ui == expected["ui"]
    written = {
        str(p.relative_to(output_dir)): p.read_text(encoding="utf-8") for p in output_dir.rglob("*") if p.is_file()
    }
    assert written == expected["files"]


def test_save_svg_counts_on_from_the_files_already_there(output_dir):
    from comfy_api.latest import io as comfy_io

    node = nodes.NODE_CLASS_MAPPINGS["SaveSVGNode"]()
    svg = comfy_io.SVG.Type([io.BytesIO(b"<svg/>")])
    node.execute(svg, "svg/ComfyUI")
    second = node.execute(svg.combine(comfy_io.SVG.Type([io.BytesIO(b"<svg/>")])), "svg/ComfyUI")["ui"]["images"]
    assert [i["filename"] for i in second] == ["ComfyUI_00002_.svg", "ComfyUI_00003_.svg"]


def test_save_svg_names_a_value_that_is_not_svg(output_dir):
    with pytest.raises(ValueError, match="must be an SVG value"):
        nodes.NODE_CLASS_MAPPINGS["SaveSVGNode"]().execute("<svg/>", "svg/ComfyUI")
