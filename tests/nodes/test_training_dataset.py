"""Make / Save / Load Training Dataset (comfy_extras.nodes_dataset of ComfyUI 0.10.0): the files Save writes equal
those upstream ComfyUI 0.10.0 writes (shard names, metadata.json, the shards' contents), Load reads ComfyUI's
files (tests/nodes/fixtures/comfyui_training_dataset.json, recorded by scripts/record_comfyui_training_dataset.py),
and Make gives what VAE Encode and CLIP Text Encode give, run through validation and the engine."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from comfy_bridge import compat
from tests.nodes.engine_run import run_core_prompt

compat.install()
import nodes  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_training_dataset.json").read_text())


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_training_dataset", REPO / "scripts" / "record_comfyui_training_dataset.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


@pytest.fixture
def output_dir(tmp_path):
    from nodes.workspace import Workspace, activate

    return Path(activate(Workspace(tmp_path / "ws").create()).output_dir)


def _node(name: str):
    return nodes.NODE_CLASS_MAPPINGS[name]()


def _load(data: bytes) -> dict:
    import io

    return torch.load(io.BytesIO(data), weights_only=True)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_save_writes_the_files_comfyui_0_10_writes(output_dir):
    latents, conditioning = RECORDER.samples()
    assert _node("SaveTrainingDataset").execute(latents, conditioning, ["sets/run1"], [RECORDER.SHARD_SIZE]) == ()
    folder = output_dir / "sets" / "run1"
    ours = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    theirs = {name: base64.b64decode(data) for name, data in FIXTURE["files"].items()}
    assert sorted(ours) == sorted(theirs) == ["metadata.json", "shard_0000.pkl", "shard_0001.pkl", "shard_0002.pkl"]
    assert ours["metadata.json"] == theirs["metadata.json"]
    for name in ("shard_0000.pkl", "shard_0001.pkl", "shard_0002.pkl"):
        assert _same(_load(ours[name]), _load(theirs[name])), name


def test_load_reads_comfyuis_files_in_shard_order(output_dir):
    assert FIXTURE["loads_back_its_own"]
    folder = output_dir / "sets" / "run1"
    folder.mkdir(parents=True)
    for name, data in FIXTURE["files"].items():
        (folder / name).write_bytes(base64.b64decode(data))
    latents, conditioning = _node("LoadTrainingDataset").execute("sets/run1")
    expected_latents, expected_conditioning = RECORDER.samples()
    assert _same(latents, expected_latents) and _same(conditioning, expected_conditioning)


def test_training_dataset_nodes_name_what_is_wrong(output_dir):
    latents, conditioning = RECORDER.samples()
    with pytest.raises(ValueError, match="5 latents but 4 conditionings"):
        _node("SaveTrainingDataset").execute(latents, conditioning[:4], ["x"], [2])
    with pytest.raises(ValueError, match="inside the output directory"):
        _node("SaveTrainingDataset").execute(latents, conditioning, ["../escape"], [2])
    with pytest.raises(ValueError, match="no dataset folder"):
        _node("LoadTrainingDataset").execute("missing")
    (output_dir / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no shard"):
        _node("LoadTrainingDataset").execute("empty")
    with pytest.raises(ValueError, match="2 texts for 3 images"):
        asyncio.run(_node("MakeTrainingDataset").execute([None] * 3, [None], [None], ["a", "b"]))


def test_make_training_dataset_encodes_as_vae_encode_and_clip_text_encode(demo_workspace):
    out = Path(demo_workspace.output_dir)
    ckpt = {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd1-tiny.safetensors"}}
    image = {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0x3366CC}}
    prompt = {
        "1": ckpt,
        "2": image,
        "3": {
            "class_type": "MakeTrainingDataset",
            "inputs": {"images": ["2", 0], "vae": ["1", 2], "clip": ["1", 1], "texts": "a blue square"},
        },
        "4": {
            "class_type": "SaveTrainingDataset",
            "inputs": {"latents": ["3", 0], "conditioning": ["3", 1], "folder_name": "w34_make", "shard_size": 10},
        },
        "5": {"class_type": "VAEEncode", "inputs": {"pixels": ["2", 0], "vae": ["1", 2]}},
        "6": {"class_type": "SaveLatent", "inputs": {"samples": ["5", 0], "filename_prefix": "w34_make/latent"}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "a blue square", "clip": ["1", 1]}},
        "8": {
            "class_type": "SaveConditioning",
            "inputs": {"conditioning": ["7", 0], "filename_prefix": "w34_make/cond"},
        },
    }
    asyncio.run(run_core_prompt(prompt))
    shard = torch.load(out / "w34_make" / "shard_0000.pkl", weights_only=True)
    latent = load_file(str(sorted((out / "w34_make").glob("latent_*.latent"))[-1]))["latent_tensor"]
    cond = load_file(str(sorted((out / "w34_make").glob("cond_*.safetensors"))[-1]))
    assert len(shard["latents"]) == 1 and torch.equal(shard["latents"][0]["samples"], latent)
    assert torch.equal(shard["conditioning"][0][0][0], cond["conditioning"])
    assert torch.equal(shard["conditioning"][0][0][1]["pooled_output"], cond["pooled_output"])
