"""A plain install has what ComfyUI's requirements.txt installs and packs import without listing it: the
packages are dependencies of comfy-cluster itself, and a pack importing them at module level loads and runs."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from comfy_bridge.registry import build_registry
from nodes import workspace
from nodes.workspace import Workspace, activate

REPO = Path(__file__).resolve().parents[2]
PACK = Path(__file__).parent / "fixture_packs_requirements" / "uses_comfyui_requirements.py"
# ComfyUI's requirements.txt entries that cannot change torch (torchvision and spandrel: docs/packs.md)
COMFYUI_SHIPPED = ("einops", "sentencepiece", "av", "kornia", "pydantic")


def test_comfyuis_torch_free_requirements_are_dependencies_of_comfy_cluster():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(line).name) for line in project["dependencies"]}
    assert set(COMFYUI_SHIPPED) <= declared, set(COMFYUI_SHIPPED) - declared
    assert not declared & {"torchvision", "torchaudio", "spandrel"}  # never a torch build of their own


def test_a_pack_importing_them_at_module_level_loads_and_runs(tmp_path):
    ws = Workspace(tmp_path / "ws").create()
    shutil.copy(PACK, ws.folder_paths("custom_nodes")[0] / PACK.name)
    before = workspace._active
    activate(ws)
    try:
        registry = build_registry(ws)
    finally:
        workspace._active = before
    assert not registry.import_failures, registry.import_failures
    image = torch.zeros(1, 4, 4, 3)
    image[..., 0] = 1.0  # red
    gray, modules = registry.classes["RearrangeToChannels"]().run(image)
    assert modules == "av,einops,kornia,sentencepiece"
    assert gray.shape == (1, 4, 4, 3) and torch.allclose(gray, torch.full_like(gray, 0.299))
