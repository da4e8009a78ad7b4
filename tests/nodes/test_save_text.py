"""Save Text (today's ComfyUI, comfy_extras/nodes_text.py): the text written to the output folder in the chosen
format (JSON pretty-printed), named as ComfyUI names it, shown in the UI with its file, and passed on."""

from __future__ import annotations

import json

import pytest

from comfy_bridge import compat
from tests.nodes.engine_run import run_core_prompt

compat.install()
import nodes


@pytest.fixture
def workspace(tmp_path):
    from nodes.workspace import Workspace, activate

    return activate(Workspace(tmp_path / "ws").create())


async def _run(prompt: dict) -> dict:
    return await run_core_prompt(prompt)


async def test_save_text_writes_numbered_files_and_passes_the_text_on(workspace):
    text = '{"a": [1, 2], "b": "é"}'
    prompt = {
        "t": {"class_type": "PrimitiveStringMultiline", "inputs": {"value": text}},
        "s": {"class_type": "SaveText", "inputs": {"text": ["t", 0], "filename_prefix": "notes/run", "format": "json"}},
        "u": {"class_type": "StringLength", "inputs": {"string": ["s", 0]}},
        "p": {"class_type": "PreviewAny", "inputs": {"source": ["u", 0]}},
    }
    first = await _run(prompt)
    assert first["s"] == {
        "text": [text],
        "files": [{"filename": "run_00001.json", "subfolder": "notes", "type": "output"}],
    }
    assert first["p"]["text"] == [str(len(text))]  # the text itself went on
    written = (workspace.output_dir / "notes" / "run_00001.json").read_text(encoding="utf-8")
    assert written == json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    prompt["t"]["inputs"]["value"] = "not json {"
    second = await _run(prompt)
    # ComfyUI's numbering reads a counter only from "<stem>_<counter>_..." names, so a text file (no trailing
    # underscore) is found again at 00001 and replaced, as in ComfyUI
    assert second["s"]["files"][0]["filename"] == "run_00001.json"
    assert (workspace.output_dir / "notes" / "run_00001.json").read_text() == "not json {"


def test_save_text_names_a_bad_format_and_refuses_paths_outside_the_output(workspace):
    with pytest.raises(ValueError, match="format 'exe'"):
        nodes.NODE_CLASS_MAPPINGS["SaveText"]().execute("x", "a", "exe")
    with pytest.raises(Exception, match="(?i)output|outside|unsafe|\\.\\."):
        nodes.NODE_CLASS_MAPPINGS["SaveText"]().execute("x", "../../escape", "txt")
    assert not any(workspace.root.parent.glob("escape*"))
