"""PhotoMakerLoader and PhotoMakerEncode (nodes/library/photomaker.py, nodes/models/photomaker.py): on the tiny
PhotoMaker file and its SDXL CLIP-L + CLIP-G (DualCLIPLoader type sdxl), the conditioning and pooled output equal
ComfyUI 0.3.64's within 1e-5 for prompts with the trigger word, one whose 0.3.64 word ids drop tokens, and one
without it (tests/nodes/fixtures/comfyui_photomaker.json, recorded by scripts/record_comfyui_photomaker.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.node_calls import active_workspace, call_node
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_photomaker.json").read_text())


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    from nodes.models.photomaker_demo import build_demo_photomaker

    yield from active_workspace(tmp_path_factory.mktemp("photomaker"), build_demo_photomaker)


def test_fixture_was_recorded_on_these_files(ws) -> None:
    for rel, digest in FIXTURE["files"].items():
        assert hashlib.sha256((ws.models_dir / rel).read_bytes()).hexdigest() == digest, rel


def _inputs(ws):
    from nodes.models.photomaker_demo import CLIP_FILES, FILE

    (clip,) = asyncio.run(
        call_node(
            "DualCLIPLoader",
            clip_name1=Path(CLIP_FILES["l"]).name,
            clip_name2=Path(CLIP_FILES["g"]).name,
            type="sdxl",
        )
    )
    (photomaker,) = asyncio.run(call_node("PhotoMakerLoader", photomaker_model_name=Path(FILE).name))
    rec = FIXTURE["image"]
    image = torch.rand(rec["shape"], generator=torch.Generator().manual_seed(rec["seed"]))
    return clip, photomaker, image


def test_encode_equals_comfyui(ws) -> None:
    torch.set_num_threads(1)
    clip, photomaker, image = _inputs(ws)
    for rec in FIXTURE["encode"]:
        ((cond, extra),) = asyncio.run(
            call_node("PhotoMakerEncode", photomaker=photomaker, image=image, clip=clip, text=rec["text"])
        )[0]
        torch.testing.assert_close(cond, tensor(rec["cond"]), rtol=0, atol=1e-5, msg=rec["text"])
        torch.testing.assert_close(extra["pooled_output"], tensor(rec["pooled"]), rtol=0, atol=1e-5)


def test_the_identity_changes_the_class_words_row_only(ws) -> None:
    """The fused prompt differs from the plain one at the class word's row alone."""
    torch.set_num_threads(1)
    clip, photomaker, image = _inputs(ws)
    text = FIXTURE["encode"][0]["text"]
    ((fused, _),) = asyncio.run(
        call_node("PhotoMakerEncode", photomaker=photomaker, image=image, clip=clip, text=text)
    )[0]
    ((plain, _),) = asyncio.run(call_node("CLIPTextEncode", clip=clip, text=text))[0]
    changed = (fused - plain).abs().amax(-1)[0].nonzero().flatten().tolist()
    assert changed == [text.split(" ").index("photomaker")]


def test_a_long_prompt_with_the_trigger_is_refused_by_name(ws) -> None:
    clip, photomaker, image = _inputs(ws)
    text = "photo " * 80 + "of a man photomaker"
    with pytest.raises(ValueError, match="one chunk"):
        asyncio.run(call_node("PhotoMakerEncode", photomaker=photomaker, image=image, clip=clip, text=text))


def test_a_file_without_an_id_encoder_is_refused_by_name(ws, tmp_path) -> None:
    from nodes.models.errors import ModelLoadError
    from nodes.models.photomaker import read_photomaker_file

    path = tmp_path / "not-photomaker.bin"
    torch.save({"lora_weights": {"x": torch.zeros(1)}}, path)
    with pytest.raises(ModelLoadError, match="not a PhotoMaker v1 model"):
        read_photomaker_file(str(path))
