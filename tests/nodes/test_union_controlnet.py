"""Union ControlNets (xinsir's controlnet-union-sdxl-1.0 / ProMax; issue 38): the tiny ProMax-layout file loads
without a config.json and gives ComfyUI 0.3.64's residuals for "auto" and two chosen types, after
SetUnionControlNetType (tests/nodes/fixtures/comfyui_union_controlnet.json, recorded by
scripts/record_comfyui_union_controlnet.py); a type beyond the file's rows and a bad type name are refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_union_controlnet.json").read_text())


@pytest.fixture(scope="module")
def union_file(tmp_path_factory) -> Path:
    from nodes.models.controlnet_union_demo import build_demo_controlnet_union

    (path,) = build_demo_controlnet_union(tmp_path_factory.mktemp("union") / "models")
    return path


def control_net(path: Path, type_name: str):
    from nodes.library.union_controlnet import SetUnionControlNetType
    from nodes.loaders import make_ref

    (ref,) = SetUnionControlNetType().set_controlnet_type(make_ref("controlnet", "sdxl", [path]), type_name)
    return ref


def test_demo_file_is_the_recorded_one_and_detected(union_file) -> None:
    from nodes.models.detect import probe

    assert hashlib.sha256(union_file.read_bytes()).hexdigest() == FIXTURE["sha256"]
    info = probe(union_file)
    assert (info.arch, info.kind, info.layout) == ("sdxl", "controlnet", "diffusers")


@pytest.mark.parametrize("type_name", sorted(FIXTURE["residuals"]))
def test_residuals_match_comfyui(union_file, type_name: str) -> None:
    from nodes.models.loader import load_controlnet

    torch.set_num_threads(1)
    given = {k: tensor(v) for k, v in FIXTURE["inputs"].items() if k != "time_ids"}
    net = load_controlnet(control_net(union_file, type_name))
    b = given["x"].shape[0]
    cond = {
        "context": given["context"],
        "pooled": given["pooled"],
        "time_ids": torch.tensor([FIXTURE["inputs"]["time_ids"]]).repeat(b, 1),
    }
    out = net.apply(given["x"], given["timestep"], cond, given["hint"], FIXTURE["strength"])
    expected = FIXTURE["residuals"][type_name]
    assert len(out.down) == len(expected["down"])
    for ours, theirs in zip([*out.down, out.mid], [*expected["down"], expected["mid"]]):
        theirs = tensor(theirs)
        assert ours.shape == theirs.shape
        assert (ours - theirs).abs().max().item() <= 1e-5


def test_types_differ_and_bad_types_are_named(union_file) -> None:
    from nodes.library.union_controlnet import SetUnionControlNetType
    from nodes.loaders import make_ref
    from nodes.models.controlnet_union_demo import PROMAX_TYPES
    from nodes.models.loader import load_controlnet

    residuals = FIXTURE["residuals"]
    assert not torch.equal(tensor(residuals["auto"]["mid"]), tensor(residuals["depth"]["mid"]))
    with pytest.raises(ValueError, match="type: 'pose'"):
        SetUnionControlNetType().set_controlnet_type(make_ref("controlnet", "sdxl", [union_file]), "pose")
    beyond = make_ref("controlnet", "sdxl", [union_file]).with_option("control_type", PROMAX_TYPES)
    with pytest.raises(ValueError, match="has 8 control types"):
        load_controlnet(beyond)
