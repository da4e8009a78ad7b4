"""Save Conditioning and Load Conditioning (today's ComfyUI comfy_extras/nodes_cond.py, newer than 0.10.0, so
there is no ComfyUI output to record): the file layout, names and errors below are the semantics read from the
newest Comfy-Org source, checked by hand: embeddings under `conditioning`, tensor options by name, tensor lists
as `name.<i>`, scalar options as JSON in the `conditioning_options` metadata, files named
`<prefix>_<counter:05>_.safetensors` in the output folder, a one-entry conditioning only."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from nodes.library.conditioning_file import ConditioningLoader, SaveConditioning


@pytest.fixture
def ws(tmp_path):
    from nodes.workspace import Workspace, activate

    workspace = Workspace(tmp_path / "ws").create()
    activate(workspace)
    return workspace


def _conditioning() -> list:
    gen = torch.Generator().manual_seed(34)
    return [
        [
            torch.rand(1, 5, 8, generator=gen),
            {
                "pooled_output": torch.rand(1, 8, generator=gen),
                "guidance": 3.5,
                "strength": 1,
                "flag": True,
                "name": "x",
                "reference_latents": [torch.rand(1, 4, 2, 2, generator=gen), torch.rand(1, 4, 3, 3, generator=gen)],
                "unset": None,
            },
        ]
    ]


def test_save_writes_the_layout_and_numbers_files(ws):
    cond = _conditioning()
    assert SaveConditioning().execute(cond, "conditioning/ComfyUI") == {"ui": {}, "result": ()}
    SaveConditioning().execute(cond, "conditioning/ComfyUI")
    folder = ws.output_dir / "conditioning"
    assert sorted(p.name for p in folder.iterdir()) == ["ComfyUI_00001_.safetensors", "ComfyUI_00002_.safetensors"]
    with safe_open(str(folder / "ComfyUI_00001_.safetensors"), framework="pt") as f:
        assert sorted(f.keys()) == ["conditioning", "pooled_output", "reference_latents.0", "reference_latents.1"]
        assert torch.equal(f.get_tensor("conditioning"), cond[0][0])
        assert torch.equal(f.get_tensor("reference_latents.1"), cond[0][1]["reference_latents"][1])
        assert json.loads(f.metadata()["conditioning_options"]) == {
            "guidance": 3.5,
            "strength": 1,
            "flag": True,
            "name": "x",
        }


def test_load_restores_what_was_saved(ws):
    cond = _conditioning()
    SaveConditioning().execute(cond, "c")
    (ws.output_dir / "c_00001_.safetensors").rename(ws.root / "models" / "embeddings" / "c.safetensors")
    (loaded,) = ConditioningLoader().execute("c.safetensors")
    assert len(loaded) == 1
    tensor, options = loaded[0]
    assert torch.equal(tensor, cond[0][0])
    assert sorted(options) == ["flag", "guidance", "name", "pooled_output", "reference_latents", "strength"]
    assert torch.equal(options["pooled_output"], cond[0][1]["pooled_output"])
    assert [t.shape for t in options["reference_latents"]] == [(1, 4, 2, 2), (1, 4, 3, 3)]
    assert torch.equal(options["reference_latents"][0], cond[0][1]["reference_latents"][0])
    assert (options["guidance"], options["strength"], options["flag"], options["name"]) == (3.5, 1, True, "x")


def test_load_reads_a_plain_file_and_offers_the_embeddings_folder(ws):
    emb = torch.arange(12.0).reshape(1, 3, 4)
    save_file(
        {"conditioning": emb, "pooled_output": torch.ones(1, 4)},
        str(ws.root / "models" / "embeddings" / "plain.safetensors"),
    )
    assert "plain.safetensors" in ConditioningLoader.INPUT_TYPES()["required"]["conditioning_name"][1]["options"]
    ((tensor, options),) = ConditioningLoader().execute("plain.safetensors")[0]
    assert torch.equal(tensor, emb) and torch.equal(options["pooled_output"], torch.ones(1, 4))


def test_bad_input_is_named(ws):
    cond = _conditioning()
    with pytest.raises(ValueError, match="one entry"):
        SaveConditioning().execute(cond + cond, "c")
    with pytest.raises(ValueError, match="'control'"):
        SaveConditioning().execute([[cond[0][0], {"control": object()}]], "c")
    save_file({"other": torch.ones(2)}, str(ws.root / "models" / "embeddings" / "nocond.safetensors"))
    with pytest.raises(ValueError, match="no 'conditioning' tensor"):
        ConditioningLoader().execute("nocond.safetensors")
    with pytest.raises(FileNotFoundError, match="conditioning_name"):
        ConditioningLoader().execute("missing.safetensors")
