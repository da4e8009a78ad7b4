"""An executor on another machine finds the files a ModelRef names at the head's paths in its own workspace's
model folders: by the name within the folder (subfolders kept), only where the content has the head's digest;
a file it has no copy of is refused naming it. Where the head's path exists, nothing changes."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import save_file

from cluster import refs
from cluster.refs import ModelRef, Patch, on_this_machine
from nodes import workspace
from nodes.workspace import Workspace


def _file(path, value: float) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.full((4,), value)}, str(path))
    return refs.file_digest(path)


@pytest.fixture
def here(tmp_path):
    """This machine's workspace, active, with copy-finding on as an executor that joined over TCP has it."""
    import nodes.modelfns  # noqa: F401  (installs the finder)

    before = workspace._active
    ws = workspace.activate(Workspace(tmp_path / "here").create())
    refs.verify_digests(True)
    fetch, refs._fetch = refs._fetch, None  # no head to fetch from (tests/dataplane covers fetching)
    yield ws
    refs.verify_digests(False)
    refs._fetch = fetch
    workspace._active = before


def test_the_heads_files_are_found_by_name_and_content(here, tmp_path):
    head = tmp_path / "head" / "models"
    ckpt_digest = _file(head / "checkpoints" / "sd" / "model.safetensors", 1.0)
    lora_digest = _file(head / "loras" / "style.safetensors", 2.0)
    _file(here.models_dir / "checkpoints" / "model.safetensors", 9.0)  # same name, other content: not it
    _file(here.models_dir / "checkpoints" / "sd" / "model.safetensors", 1.0)
    _file(here.models_dir / "loras" / "style.safetensors", 2.0)
    ref = ModelRef(
        "diffusion_model",
        "sd1",
        (str(head / "checkpoints" / "sd" / "model.safetensors"),),
        (ckpt_digest,),
        (Patch(str(head / "loras" / "style.safetensors"), lora_digest, 1.0),),
    )
    shutil.rmtree(head)  # as on another machine: the head's paths are not here
    local = on_this_machine(ref)
    assert local.sources == (str(here.models_dir / "checkpoints" / "sd" / "model.safetensors"),)
    assert local.patches[0].path == str(here.models_dir / "loras" / "style.safetensors")
    assert local.digests == ref.digests and local.patches[0].digest == lora_digest


def test_a_file_this_machine_lacks_is_refused_by_name(here, tmp_path):
    path = tmp_path / "head" / "models" / "vae" / "only-there.safetensors"
    digest = _file(path, 3.0)
    _file(here.models_dir / "vae" / "only-there.safetensors", 4.0)  # its name, not its content
    path.unlink()  # as on another machine: the head's path is not here
    with pytest.raises(FileNotFoundError, match=f"model file {path} is not on this machine"):
        on_this_machine(ModelRef("vae", "sd1", (str(path),), (digest,)))


def test_where_the_heads_path_exists_the_ref_is_unchanged(here, tmp_path):
    path = tmp_path / "shared" / "model.safetensors"
    ref = ModelRef("vae", "sd1", (str(path),), (_file(path, 5.0),))
    assert on_this_machine(ref) is ref
