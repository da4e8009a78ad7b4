"""`folder_paths` is state packs change, as in ComfyUI: `folder_names_and_paths` is the active workspace's own
folder table, so a pack's new key (GGUF's `unet_gguf`, VideoHelperSuite's `VHS_video_formats`), its paths and
extensions are what get_filename_list, our loaders, /object_info and a pack node on an executor read; the
file lists are cached as ComfyUI caches them, per tenant's paths."""

from __future__ import annotations

import pytest

from cluster.executor.local_cluster import start_local_cluster
from comfy_bridge.tenancy import tenant_context
from comfy_bridge.tenancy.tenant_folders import TenantWorkspace
from nodes import workspace
from nodes.workspace import Workspace, activate

from .conftest import output, run_prompt


@pytest.fixture
def fresh_ws(tmp_path):
    before = workspace._active
    ws = activate(Workspace(tmp_path / "ws").create())
    yield ws
    workspace._active = before


def _touch(path, data: bytes = b"0"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


async def test_a_packs_folder_keys_reach_object_info_loaders_and_executors(packs_registry, packs_ws, tmp_path):
    import folder_paths

    _touch(packs_ws.models_dir / "unet" / "tiny.gguf")
    _touch(packs_ws.models_dir / "unet" / "not_gguf.safetensors")
    table = folder_paths.folder_names_and_paths
    assert table is packs_ws.folder_names_and_paths
    # GGUF's key shares diffusion_models' path list: a path added there is a unet_gguf path too
    assert table["unet_gguf"][0] is table["diffusion_models"][0]
    more = tmp_path / "more_unets"
    _touch(more / "sub" / "other.gguf")
    folder_paths.add_model_folder_path("unet", str(more))
    try:
        assert folder_paths.get_filename_list("unet_gguf") == ["sub/other.gguf", "tiny.gguf"]
        assert packs_ws.list_files("unet_gguf") == ["sub/other.gguf", "tiny.gguf"]  # what our loaders call
        info = packs_registry.node_info("GGUFLikeLoader")["input"]["required"]
        assert info["unet_name"][0] == ["sub/other.gguf", "tiny.gguf"]
        # VideoHelperSuite's key, written with a tuple of paths, takes a formats folder
        _touch(tmp_path / "formats" / "h264.json", b"{}")
        folder_paths.add_model_folder_path("VHS_video_formats", str(tmp_path / "formats"))
        assert folder_paths.get_filename_list("VHS_video_formats") == ["h264.json"]
        prompt = {
            "load": {"class_type": "GGUFLikeLoader", "inputs": {"unet_name": "sub/other.gguf", "format": "h264.json"}},
            "show": {"class_type": "V1ShowText", "inputs": {"text": ["load", 0]}},
        }
        local, _ = await run_prompt(packs_registry, prompt, prompt_id="gguf-local")
        head, rt = start_local_cluster(1, threads_per_executor=1)
        try:
            remote, _ = await run_prompt(packs_registry, prompt, runtime=rt, prompt_id="gguf-executor")
        finally:
            head.stop()
        for executor in (local, remote):
            assert executor.success, executor.status_messages
            assert output(executor, "load") == str(more / "sub" / "other.gguf")
    finally:
        table["diffusion_models"][0].remove(str(more))


def test_writes_into_the_table_are_what_our_own_loaders_list(fresh_ws, tmp_path):
    import folder_paths

    import nodes

    loader = nodes.NODE_CLASS_MAPPINGS["CheckpointLoaderSimple"]
    folder_paths.folder_names_and_paths["checkpoints"][0].append(str(_touch(tmp_path / "ck" / "a.safetensors").parent))
    assert loader.INPUT_TYPES()["required"]["ckpt_name"][0] == ["a.safetensors"]
    # the default model folders share one extension set: a pack extending it extends them all
    _touch(tmp_path / "ck" / "b.gguf")
    folder_paths.supported_pt_extensions.add(".gguf")
    try:
        assert loader.INPUT_TYPES()["required"]["ckpt_name"][0] == ["a.safetensors", "b.gguf"]
        assert folder_paths.folder_names_and_paths["loras"][1] is folder_paths.supported_pt_extensions
    finally:
        folder_paths.supported_pt_extensions.discard(".gguf")
    assert loader.INPUT_TYPES()["required"]["ckpt_name"][0] == ["a.safetensors"]


def test_comfyui_rules_for_new_and_unknown_keys(fresh_ws, tmp_path):
    import folder_paths

    with pytest.raises(KeyError):
        folder_paths.get_filename_list("never_registered")
    with pytest.raises(KeyError):
        folder_paths.get_folder_paths("never_registered")
    assert folder_paths.get_full_path("never_registered", "x") is None
    # a key made by add_model_folder_path (or extra_model_paths.yaml) lists every file, and a pack that finds
    # it with no extensions adds its own (VideoHelperSuite)
    _touch(tmp_path / "vhs" / "a.json")
    _touch(tmp_path / "vhs" / "notes.txt")
    folder_paths.add_model_folder_path("VHS_video_formats", str(tmp_path / "vhs"))
    assert folder_paths.get_filename_list("VHS_video_formats") == ["a.json", "notes.txt"]
    folder_paths.folder_names_and_paths["VHS_video_formats"][1].add(".json")
    assert folder_paths.get_filename_list("VHS_video_formats") == ["a.json"]
    folder_paths.add_model_folder_path("VHS_video_formats", str(tmp_path / "first"), is_default=True)
    assert folder_paths.get_folder_paths("VHS_video_formats") == [str(tmp_path / "first"), str(tmp_path / "vhs")]
    # an executor opens the same table from the head's snapshot
    folder_paths.folder_names_and_paths["unet_gguf"] = (
        folder_paths.folder_names_and_paths["diffusion_models"][0],
        {".gguf"},
    )
    copy = Workspace.from_snapshot(fresh_ws.snapshot())
    assert copy.folder_paths("unet_gguf") == fresh_ws.folder_paths("diffusion_models")
    assert copy.folder_extensions("unet_gguf") == {".gguf"} and copy.folder_extensions("VHS_video_formats") == {".json"}
    assert copy.folder_names_and_paths["checkpoints"][1] is folder_paths.supported_pt_extensions


def test_file_lists_are_cached_as_comfyui_caches_them(fresh_ws, tmp_path):
    import folder_paths

    loras = fresh_ws.models_dir / "loras"
    _touch(loras / "a.safetensors")
    assert folder_paths.get_filename_list("loras") == ["a.safetensors"]
    cached = folder_paths.filename_list_cache["loras"]
    assert folder_paths.get_filename_list("loras") == ["a.safetensors"]
    assert folder_paths.filename_list_cache["loras"] is cached  # unchanged folders: not walked again
    _touch(loras / "deep" / "b.safetensors")  # a new folder changes loras' mtime
    assert folder_paths.get_filename_list("loras") == ["a.safetensors", "deep/b.safetensors"]
    _touch(loras / "deep" / "c.safetensors")  # only deep/'s mtime changes
    assert folder_paths.get_filename_list("loras") == ["a.safetensors", "deep/b.safetensors", "deep/c.safetensors"]
    with folder_paths.cache_helper:  # one listing per block, as ComfyUI
        assert len(folder_paths.get_filename_list("loras")) == 3
        _touch(loras / "d.safetensors")
        assert len(folder_paths.get_filename_list("loras")) == 3
    assert len(folder_paths.get_filename_list("loras")) == 4


def test_the_cache_never_shows_one_tenant_anothers_models(tmp_path):
    import folder_paths

    before = workspace._active
    ws = activate(TenantWorkspace.wrap(Workspace(tmp_path / "ws").create()))
    try:
        _touch(ws.models_dir / "loras" / "shared.safetensors")
        _touch(ws.tenant_models_dir("alice", "loras") / "alices.safetensors")
        with tenant_context.scoped("alice"):
            assert folder_paths.get_filename_list("loras") == ["alices.safetensors", "shared.safetensors"]
        with tenant_context.scoped("bob"):
            assert folder_paths.get_filename_list("loras") == ["shared.safetensors"]
        with tenant_context.scoped("alice"), folder_paths.cache_helper:
            assert folder_paths.get_filename_list("loras") == ["alices.safetensors", "shared.safetensors"]
            with tenant_context.scoped("bob"):
                assert folder_paths.get_filename_list("loras") == ["shared.safetensors"]
    finally:
        workspace._active = before
