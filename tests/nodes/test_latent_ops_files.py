"""What the recorded ComfyUI cases cannot show: the .latent file format (keys, prompt metadata, legacy
scaling, naming), latent operations that pickle to travel between processes, and PreviewAny's JSON text."""

from __future__ import annotations

import json
import pickle

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from nodes.library.latent_ops import (
    LEGACY_LATENT_SCALE,
    LatentOperationSharpen,
    LatentOperationTonemapReinhard,
    LoadLatent,
    SaveLatent,
)
from nodes.library.preview_any import PreviewAny


def test_save_latent_writes_comfyuis_format_and_counts_up(workspace):
    samples = {"samples": torch.arange(24, dtype=torch.float32).reshape(1, 4, 2, 3)}
    first = SaveLatent().save(samples, "latents/run", prompt={"1": {"class_type": "X"}})["ui"]["latents"][0]
    second = SaveLatent().save(samples, "latents/run")["ui"]["latents"][0]
    assert (first["filename"], second["filename"]) == ("run_00001_.latent", "run_00002_.latent")
    assert first["subfolder"] == "latents" and first["type"] == "output"
    with safe_open(str(workspace.output_dir / "latents" / first["filename"]), "pt") as f:
        assert set(f.keys()) == {"latent_tensor", "latent_format_version_0"}
        assert torch.equal(f.get_tensor("latent_tensor"), samples["samples"])
        assert json.loads(f.metadata()["prompt"]) == {"1": {"class_type": "X"}}


def test_load_latent_round_trip_and_legacy_scale(workspace):
    lat = torch.randn(2, 4, 3, 3)
    save_file(
        {"latent_tensor": lat, "latent_format_version_0": torch.tensor([])}, str(workspace.input_dir / "new.latent")
    )
    save_file({"latent_tensor": lat}, str(workspace.input_dir / "old.latent"))
    assert LoadLatent.INPUT_TYPES()["required"]["latent"][0] == ["new.latent", "old.latent"]
    assert torch.equal(LoadLatent().load("new.latent")[0]["samples"], lat)
    assert torch.equal(LoadLatent().load("old.latent")[0]["samples"], lat * (1.0 / LEGACY_LATENT_SCALE))
    assert LoadLatent.VALIDATE_INPUTS("gone.latent") == "Invalid latent file: gone.latent"
    assert LoadLatent.VALIDATE_INPUTS("../escape.latent") == "Invalid latent file: ../escape.latent"


def test_latent_operations_pickle_by_value():
    lat = torch.randn(1, 4, 12, 12)
    for op in (LatentOperationTonemapReinhard().execute(0.5)[0], LatentOperationSharpen().execute(2, 1.0, 0.3)[0]):
        copy = pickle.loads(pickle.dumps(op))
        assert copy == op and torch.equal(copy(latent=lat), op(latent=lat))


def test_preview_any_shows_lists_and_dicts_as_json():
    def text(value):
        return PreviewAny().main(value)["ui"]["text"]

    assert text({"a": [1, 2.5, None]}) == ('{"a": [1, 2.5, null]}',)
    assert text(["x", True]) == ('["x", true]',)
    assert text(None) == ("None",)
    assert text(torch.zeros(2)) == ("tensor([0., 0.])",)
