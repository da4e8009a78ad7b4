"""ComfyUI module names resolve to our implementations."""

from __future__ import annotations

import importlib

import pytest


def test_comfyui_names_are_our_modules():
    pairs = {
        "comfy.utils": "comfy_bridge.compat.comfy.utils",
        "comfy_execution.graph_utils": "comfy_bridge.compat.comfy_execution.graph_utils",
        "comfy_api.v0_0_2": "comfy_bridge.compat.comfy_api.v0_0_2",
        "folder_paths": "comfy_bridge.compat.folder_paths",
    }
    for alias, real in pairs.items():
        assert importlib.import_module(alias) is importlib.import_module(real)
    from comfy_execution.graph import ExecutionBlocker

    from comfy_bridge.execution.graph_utils import ExecutionBlocker as Ours

    assert ExecutionBlocker is Ours


def test_io_any_matches_everything_and_unions_overlap():
    from comfy.comfy_types import IO

    assert not (IO.ANY != "IMAGE") and not ("LATENT" != IO.ANY)
    assert not (IO.NUMBER != "INT") and IO.NUMBER != "IMAGE"


def test_folder_paths_follow_the_active_workspace(tmp_path):
    import folder_paths

    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "x").create())
    (ws.models_dir / "loras" / "a.safetensors").write_bytes(b"0")
    assert folder_paths.get_filename_list("loras") == ["a.safetensors"]
    assert folder_paths.get_output_directory() == str(ws.output_dir)
    full, name, counter, sub, _ = folder_paths.get_save_image_path("sub/img", folder_paths.get_output_directory())
    (ws.output_dir / "sub" / "img_00004_.png").write_bytes(b"")
    assert (name, sub, counter) == ("img", "sub", 1)
    assert folder_paths.get_save_image_path("sub/img", folder_paths.get_output_directory())[2] == 5


def test_folder_paths_annotated_files_stay_inside_their_folder(tmp_path):
    """What node packs open through get_annotated_filepath obeys the containment rule of /view."""
    import folder_paths

    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "x").create())
    (tmp_path / "secret.png").write_bytes(b"secret")
    (ws.input_dir / "link.png").symlink_to(tmp_path / "secret.png")
    (ws.output_dir / "link.png").symlink_to(tmp_path / "secret.png")
    (ws.input_dir / "in.png").write_bytes(b"in")
    assert folder_paths.get_annotated_filepath("in.png") == str(ws.input_dir / "in.png")
    assert folder_paths.exists_annotated_filepath("in.png")
    for name in ("link.png", "link.png [output]", "../x/input/in.png", "/etc/hostname"):
        with pytest.raises(ValueError):
            folder_paths.get_annotated_filepath(name)
        assert not folder_paths.exists_annotated_filepath(name)


def test_folder_paths_finds_a_symlinked_model_file(tmp_path):
    """Users link model files in from other disks: model folders follow symlinks, unlike input/output."""
    import folder_paths

    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "x").create())
    (tmp_path / "big.safetensors").write_bytes(b"0")
    (ws.models_dir / "loras" / "big.safetensors").symlink_to(tmp_path / "big.safetensors")
    assert folder_paths.get_filename_list("loras") == ["big.safetensors"]
    assert folder_paths.get_full_path("loras", "big.safetensors") == str(tmp_path / "big.safetensors")
    assert folder_paths.get_full_path("loras", "../../big.safetensors") is None  # names still cannot climb


async def test_v3_set_progress_updates_running_node(run, sink, registry):
    from comfy_api.v0_0_2 import ComfyAPISync

    class Reporter:
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"value": ("FLOAT",)}}

        RETURN_TYPES = ("FLOAT",)
        FUNCTION = "run"

        def run(self, value):
            ComfyAPISync().execution.set_progress(value=0.5, max_value=1.0)
            return (value,)

    registry.classes["Reporter"] = Reporter
    prompt = {
        "r": {"class_type": "Reporter", "inputs": {"value": 1.0}},
        "o": {"class_type": "Output", "inputs": {"value": ["r", 0]}},
    }
    await run(prompt)
    halfway = [d["nodes"]["r"] for e, d in sink.events("progress_state") if d["nodes"].get("r", {}).get("value") == 0.5]
    assert halfway and halfway[0]["state"] == "running"
    assert sink.events("progress") == []  # set_progress updates the registry only
