"""DiffControlNetLoader loads what ControlNetLoader loads (the MODEL plays no part for those files, as in
ComfyUI) and refuses a "difference" ControlNet, whose offsets from the model's weights it does not add."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from nodes.library.diff_controlnet import DiffControlNetLoader
from nodes.loaders import CheckpointLoaderSimple, ControlNetLoader

NAME = "sd1-tiny-controlnet.safetensors"


def test_loads_as_controlnetloader(demo_workspace):
    model = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")[0]
    assert DiffControlNetLoader().load_controlnet(model, NAME) == ControlNetLoader().load_controlnet(NAME)


def test_refuses_a_difference_controlnet(demo_workspace, tmp_path):
    model = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")[0]
    folder = tmp_path / "controlnet"
    folder.mkdir()
    save_file(
        {"difference": torch.zeros(1), "control_model.zero_convs.0.0.weight": torch.zeros(4, 4, 1, 1)},
        str(folder / "diff.safetensors"),
    )
    demo_workspace.add_folder_path("controlnet", folder)
    try:
        with pytest.raises(ValueError, match="difference ControlNet"):
            DiffControlNetLoader().load_controlnet(model, "diff.safetensors")
        with pytest.raises(ValueError, match="model"):
            DiffControlNetLoader().load_controlnet(None, NAME)
    finally:
        demo_workspace.folder_names_and_paths["controlnet"][0].remove(str(folder))
