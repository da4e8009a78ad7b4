"""CheckpointLoader (checkpoint + ldm YAML config) and DiffusersLoader (a diffusers pipeline folder).

CheckpointLoader takes from a config what ComfyUI 0.3.64's comfy.sd.load_checkpoint takes: v-prediction and
the CLIP layer (tests/nodes/fixtures/comfyui_checkpoint_configs.json, read from ComfyUI's own configs by
scripts/record_comfyui_checkpoint_configs.py). DiffusersLoader: the demo checkpoints saved as diffusers
folders render the checkpoints' images."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from nodes.library.legacy_loaders import COMFYUI_CONFIGS, CheckpointLoader, DiffusersLoader
from nodes.library.model_advanced import ModelSamplingDiscrete
from nodes.loaders import CheckpointLoaderSimple, CLIPSetLastLayer
from tests.e2e.test_samplers_on_executors import render_in_process

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_checkpoint_configs.json").read_text())
SD1 = "sd1-tiny.safetensors"


def test_comfyuis_configs_are_known_with_what_comfyui_reads_from_them():
    assert {name: {"v_prediction": v, "layer_idx": layer} for name, (v, layer) in COMFYUI_CONFIGS.items()} == FIXTURE[
        "configs"
    ]


def test_config_options_list_comfyuis_configs(demo_workspace):
    options = CheckpointLoader.INPUT_TYPES()["required"]["config_name"][0]
    assert set(FIXTURE["configs"]) <= set(options)


def test_plain_config_loads_as_load_checkpoint(demo_workspace):
    assert CheckpointLoader().load_checkpoint("v1-inference.yaml", SD1) == CheckpointLoaderSimple().load_checkpoint(SD1)


def test_clip_skip_config_sets_the_clip_layer(demo_workspace):
    model, clip, vae = CheckpointLoaderSimple().load_checkpoint(SD1)
    assert CheckpointLoader().load_checkpoint("v1-inference_clip_skip_2.yaml", SD1) == (
        model,
        CLIPSetLastLayer().set_last_layer(clip, -2)[0],
        vae,
    )


def test_v_config_samples_as_v_prediction(demo_workspace):
    model, clip, vae = CheckpointLoaderSimple().load_checkpoint(SD1)
    assert CheckpointLoader().load_checkpoint("v2-inference-v.yaml", SD1) == (
        ModelSamplingDiscrete().patch(model, "v_prediction", False)[0],
        clip,
        vae,
    )


def test_a_config_file_in_the_workspace_is_read(demo_workspace):
    path = demo_workspace.models_dir / "configs" / "custom-v-skip3.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        'model:\n  params:\n    parameterization: "v"\n    cond_stage_config:\n      params:\n        layer_idx: -3\n'
    )
    try:
        model, clip, vae = CheckpointLoaderSimple().load_checkpoint(SD1)
        assert CheckpointLoader().load_checkpoint("custom-v-skip3.yaml", SD1) == (
            ModelSamplingDiscrete().patch(model, "v_prediction", False)[0],
            clip.with_option("layer", -3),
            vae,
        )
        path.write_text("just: text\n")
        with pytest.raises(ValueError, match="config_name: 'custom-v-skip3.yaml' is not an ldm model config"):
            CheckpointLoader().load_checkpoint("custom-v-skip3.yaml", SD1)
    finally:
        path.unlink()
    with pytest.raises(ValueError, match="config_name: 'nope.yaml' is not a file"):
        CheckpointLoader().load_checkpoint("nope.yaml", SD1)


def _prompt(workflow: str, loader: dict, **sampler) -> dict:
    prompt = json.loads((REPO / "workflows_json" / workflow).read_text())
    prompt["4"] = loader
    prompt["3"]["inputs"].update(steps=3, **sampler)
    prompt["5"]["inputs"].update(width=64, height=64)
    return prompt


def test_v_config_renders_like_the_model_sampling_node(demo_workspace):
    simple = _prompt("text_to_image.json", {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": SD1}})
    patched = json.loads(json.dumps(simple))
    patched["20"] = {
        "class_type": "ModelSamplingDiscrete",
        "inputs": {"model": ["4", 0], "sampling": "v_prediction", "zsnr": False},
    }
    patched["3"]["inputs"]["model"] = ["20", 0]
    with_config = _prompt(
        "text_to_image.json",
        {"class_type": "CheckpointLoader", "inputs": {"config_name": "v2-inference-v.yaml", "ckpt_name": SD1}},
    )
    images = render_in_process(demo_workspace, {"simple": simple, "patched": patched, "config": with_config})
    assert np.array_equal(images["config"], images["patched"])
    assert not np.array_equal(images["config"], images["simple"])


def _save_as_diffusers(checkpoint: str, folder: Path, pipeline: str) -> None:
    """Write a demo checkpoint as a diffusers pipeline folder, from the modules our loader builds."""
    from nodes.models.loader import CONFIGS, load_diffusion_model, load_text_encoder, load_vae

    model, clip, vae = CheckpointLoaderSimple().load_checkpoint(checkpoint)
    load_diffusion_model(model).module.save_pretrained(folder / "unet")
    load_vae(vae).module.save_pretrained(folder / "vae")
    te = load_text_encoder(clip)
    for side, sub in zip(sorted(te.sides, key=["l", "g"].index), ("", "_2")):
        te.sides[side].module.save_pretrained(folder / f"text_encoder{sub}")
        te.sides[side].tokenizer.bpe._tok.save_pretrained(folder / f"tokenizer{sub}")
    shutil.copytree(CONFIGS / model.arch / "scheduler", folder / "scheduler")
    (folder / "model_index.json").write_text(json.dumps({"_class_name": pipeline}))


@pytest.fixture(scope="module")
def diffusers_folders(demo_workspace) -> dict[str, str]:
    base = demo_workspace.models_dir / "diffusers"
    for name, ckpt, pipeline in (
        ("sd1-tiny", SD1, "StableDiffusionPipeline"),
        ("nested/sdxl-tiny", "sdxl-tiny.safetensors", "StableDiffusionXLPipeline"),
    ):
        if not (base / name).exists():
            _save_as_diffusers(ckpt, base / name, pipeline)
    return {"text_to_image.json": "sd1-tiny", "sdxl.json": "nested/sdxl-tiny"}


def test_diffusers_folders_are_listed_as_comfyui_lists_them(diffusers_folders):
    assert set(diffusers_folders.values()) <= set(DiffusersLoader.INPUT_TYPES()["required"]["model_path"][0])


@pytest.mark.parametrize("workflow", ["text_to_image.json", "sdxl.json"])
def test_a_folder_saved_from_a_demo_checkpoint_renders_its_image(demo_workspace, diffusers_folders, workflow):
    ckpt = json.loads((REPO / "workflows_json" / workflow).read_text())["4"]
    folder = _prompt(workflow, {"class_type": "DiffusersLoader", "inputs": {"model_path": diffusers_folders[workflow]}})
    images = render_in_process(demo_workspace, {"checkpoint": _prompt(workflow, ckpt), "folder": folder})
    assert np.array_equal(images["folder"], images["checkpoint"])


def test_diffusers_loader_refuses_folders_without_every_part(demo_workspace, diffusers_folders):
    broken = demo_workspace.models_dir / "diffusers" / "no-vae"
    shutil.copytree(demo_workspace.models_dir / "diffusers" / "sd1-tiny", broken)
    shutil.rmtree(broken / "vae")
    try:
        with pytest.raises(ValueError, match="model_path: the diffusers folder 'no-vae' has no vae"):
            DiffusersLoader().load_checkpoint("no-vae")
    finally:
        shutil.rmtree(broken)
