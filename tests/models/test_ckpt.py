"""`.ckpt` checkpoints: the pickled {"state_dict": ...} layout of the original CompVis/Stability releases
(as ComfyUI's comfy.utils.load_torch_file unwraps it), read with torch.load(weights_only=True), detect and
render exactly as their .safetensors twins."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.models.demo import build_demo_models
from nodes.models.detect import probe
from nodes.models.loader import load_diffusion_model
from nodes.models.safetensors_io import load_state_dict
from nodes.models.sd2_demo import build_demo_sd2
from tests.e2e.test_samplers_on_executors import BASE_PROMPT, render_in_process


def _as_ckpt(src: Path) -> Path:
    """The twin of a .safetensors file as a training run saves it: the weights under state_dict, beside
    bookkeeping that is no tensor (global_step, as the SD releases carry it)."""
    dst = src.with_suffix(".ckpt")
    torch.save({"state_dict": dict(load_state_dict(src)), "global_step": 875000}, dst)
    return dst


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A workspace of its own with sd1-tiny and sd2-tiny-v in both formats; the active one restored after."""
    from nodes import workspace as ws_mod

    models = tmp_path_factory.mktemp("ckpt-models")
    build_demo_models(models, include_flux=False)
    build_demo_sd2(models)
    before = ws_mod._active
    ws = ws_mod.activate(ws_mod.Workspace(tmp_path_factory.mktemp("ckpt-ws")).create())
    for name in ("sd1-tiny", "sd2-tiny-v"):
        src = models / "checkpoints" / f"{name}.safetensors"
        (ws.models_dir / "checkpoints" / src.name).symlink_to(src)
        _as_ckpt(src).rename(ws.models_dir / "checkpoints" / f"{name}.ckpt")
    yield ws
    ws_mod._active = before


def test_ckpt_holds_a_pickled_state_dict_and_reads_as_its_twin(workspace):
    ckpts = workspace.models_dir / "checkpoints"
    for name in ("sd1-tiny", "sd2-tiny-v"):
        raw = torch.load(ckpts / f"{name}.ckpt", map_location="cpu", weights_only=True)
        assert set(raw) == {"state_dict", "global_step"}
        twin = load_state_dict(ckpts / f"{name}.safetensors")
        ours = load_state_dict(ckpts / f"{name}.ckpt")
        assert ours.keys() == twin.keys() and all(torch.equal(ours[k], twin[k]) for k in twin)
        a, b = probe(ckpts / f"{name}.ckpt"), probe(ckpts / f"{name}.safetensors")
        assert (a.arch, a.kind, a.components, a.prefix) == (b.arch, b.kind, b.components, b.prefix)


def test_sd2_v_prediction_is_read_from_a_ckpt(workspace):
    path = workspace.models_dir / "checkpoints" / "sd2-tiny-v.ckpt"
    model = load_diffusion_model(ModelRef("diffusion_model", "", (str(path),), (file_digest(path),), (), ()))
    assert model.sampling["prediction"] == "v"


def _prompt(ckpt: str) -> dict:
    p = json.loads(json.dumps(BASE_PROMPT))
    p["4"]["inputs"]["ckpt_name"] = ckpt
    p["3"]["inputs"].update(steps=3)
    p["5"]["inputs"].update(width=64, height=64)
    p["9"]["inputs"]["filename_prefix"] = ckpt.replace(".", "_")
    return p


@pytest.mark.parametrize("name", ["sd1-tiny", "sd2-tiny-v"])
def test_ckpt_renders_the_image_of_its_safetensors_twin(workspace, name):
    images = render_in_process(workspace, {ext: _prompt(f"{name}.{ext}") for ext in ("ckpt", "safetensors")})
    assert images["ckpt"].std() > 0
    assert np.array_equal(images["ckpt"], images["safetensors"])
