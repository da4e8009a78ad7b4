"""SD2.x: the tiny 512-base (eps) and 768-v (v-prediction) checkpoints are detected, told apart and rendered,
judged by ComfyUI's own rules for SD1/SD2/SDXL ldm files (tests/models/fixtures/comfyui_sd_unet_rules.json,
read from comfyanonymous/ComfyUI comfy/model_detection.py and comfy/supported_models.py at the commits it
names)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import UNet2DConditionModel

from cluster.refs import ModelRef, file_digest
from nodes.models import unet as unet_mod
from nodes.models.demo import _unet_ldm, build_demo_models
from nodes.models.detect import classify, probe
from nodes.models.loader import load_diffusion_model
from nodes.models.safetensors_io import load_state_dict, shapes_of
from nodes.models.sd2_demo import V_MARKER, build_demo_sd2
from tests.e2e.test_samplers_on_executors import BASE_PROMPT, render_in_process

RULES = json.loads((Path(__file__).parent / "fixtures" / "comfyui_sd_unet_rules.json").read_text())
P = unet_mod.LDM_UNET_PREFIX


def comfy_features(shapes: dict[str, tuple[int, ...]]) -> dict:
    """What ComfyUI's detect_unet_config reads from the keys the fixture lists (our own reading of the rule)."""
    stem = shapes[P + "input_blocks.0.0.weight"]
    adm = shapes.get(P + "label_emb.0.0.weight")
    n = first_transformer_block(shapes)
    return {
        "model_channels": stem[0],
        "in_channels": stem[1],
        "context_dim": shapes[P + f"input_blocks.{n}.1.transformer_blocks.0.attn2.to_k.weight"][1],
        "use_linear_in_transformer": len(shapes[P + f"input_blocks.{n}.1.proj_in.weight"]) == 2,
        "adm_in_channels": adm[1] if adm else None,
    }


def first_transformer_block(shapes: dict[str, tuple[int, ...]]) -> int:
    return min(
        int(k[len(P + "input_blocks.") :].split(".")[0])
        for k in shapes
        if k.startswith(P + "input_blocks.") and k.endswith(".1.proj_in.weight")
    )


def _real_size_shapes(family: str) -> dict[str, tuple[int, ...]]:
    """The UNet key shapes of a released checkpoint of `family`, from the published unet_config values
    (model_channels 320, channel_mult 1,2,4,4, context_dim, linear projections, SDXL's adm and depths), built
    on the meta device (nothing allocated)."""
    cfg = RULES["families"][family]
    common = {"cross_attention_dim": cfg["context_dim"], "use_linear_projection": cfg["use_linear_in_transformer"]}
    if family == "sdxl":
        common.update(
            block_out_channels=(320, 640, 1280),
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
            transformer_layers_per_block=(1, 2, 10),
            attention_head_dim=(5, 10, 20),
            addition_embed_type="text_time",
            addition_time_embed_dim=256,
            projection_class_embeddings_input_dim=cfg["adm_in_channels"],
        )
    with torch.device("meta"):
        module = UNet2DConditionModel(**common)
    return {P + k: tuple(v.shape) for k, v in _unet_ldm(module).items()}


@pytest.mark.parametrize("family", ["sd1", "sd2", "sdxl"])
def test_released_shapes_detect_as_the_family_comfyui_matches(family):
    shapes = _real_size_shapes(family)
    published = {k: v for k, v in RULES["families"][family].items() if k not in ("class", "transformer_depth")}
    assert {k: comfy_features(shapes)[k] for k in published} == published
    assert classify(shapes, f"{family}.safetensors").arch == family


def _ref(path: Path) -> ModelRef:
    return ModelRef("diffusion_model", "", (str(path),), (file_digest(path),), (), ())


@pytest.fixture(scope="module")
def sd_files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sd2-models")
    build_demo_models(root, include_flux=False)
    build_demo_sd2(root)
    return root / "checkpoints"


@pytest.mark.parametrize(
    "name,family", [("sd1-tiny", "sd1"), ("sdxl-tiny", "sdxl"), ("sd2-tiny-base", "sd2"), ("sd2-tiny-v", "sd2")]
)
def test_demo_checkpoints_read_as_comfyuis_rules_read_them(sd_files, name, family):
    """Size aside (tiny widths), each demo has the keys ComfyUI reads and the features of its family."""
    shapes, _ = shapes_of(sd_files / f"{name}.safetensors")
    n = first_transformer_block(shapes)
    assert (n == 1) == (family != "sdxl")
    read = [
        P + k.format(n=n)
        for k in RULES["keys_read"]
        if k != "label_emb.0.0.weight" and (family == "sd2" or not k.startswith("output_blocks.11."))
    ]
    assert [k for k in read if k not in shapes] == []
    feats, rule = comfy_features(shapes), RULES["families"][family]
    assert feats["use_linear_in_transformer"] == rule["use_linear_in_transformer"]
    assert (feats["adm_in_channels"] is None) == (rule["adm_in_channels"] is None)
    assert feats["in_channels"] == 4
    assert probe(sd_files / f"{name}.safetensors").arch == family


def test_sd2_prediction_follows_comfyuis_norm_bias_rule(sd_files):
    """Only the marker bias differs between the two files; ComfyUI's threshold splits them, and so do we."""
    base, v = (load_state_dict(sd_files / f"sd2-tiny-{k}.safetensors") for k in ("base", "v"))
    assert [k for k in base if not torch.equal(base[k], v[k])] == [P + V_MARKER]
    limit = RULES["sd2_v_prediction_threshold"]
    assert (
        torch.std(base[P + V_MARKER].float(), unbiased=False)
        <= limit
        < torch.std(v[P + V_MARKER].float(), unbiased=False)
    )
    preds = {
        k: load_diffusion_model(_ref(sd_files / f"sd2-tiny-{k}.safetensors")).sampling["prediction"]
        for k in ("base", "v")
    }
    assert preds == {"base": "eps", "v": "v"}


@pytest.fixture(scope="module")
def workspace(sd_files, tmp_path_factory):
    """A workspace of its own holding the SD demos, the previously active one restored after."""
    from nodes import workspace as ws_mod

    before = ws_mod._active
    ws = ws_mod.activate(ws_mod.Workspace(tmp_path_factory.mktemp("sd2-ws")).create())
    for f in sd_files.iterdir():
        (ws.models_dir / "checkpoints" / f.name).symlink_to(f)
    yield ws
    ws_mod._active = before


def prompt(ckpt: str, sampling: str | None = None) -> dict:
    """text_to_image.json on `ckpt`, 3 steps at 64x64; with `sampling`, ModelSamplingDiscrete overrides the
    prediction type the loader read from the file."""
    p = json.loads(json.dumps(BASE_PROMPT))
    p["4"]["inputs"]["ckpt_name"] = ckpt
    p["3"]["inputs"].update(steps=3)
    p["5"]["inputs"].update(width=64, height=64)
    p["9"]["inputs"]["filename_prefix"] = f"{ckpt.split('.')[0]}_{sampling}"
    if sampling is not None:
        p["10"] = {
            "class_type": "ModelSamplingDiscrete",
            "inputs": {"model": ["4", 0], "sampling": sampling, "zsnr": False},
        }
        p["3"]["inputs"]["model"] = ["10", 0]
    return p


def test_sd2_checkpoints_render_with_the_prediction_read_from_them(workspace):
    """Each file renders as it does with its prediction type set by hand, and not as with the other one."""
    cases = {
        "base": prompt("sd2-tiny-base.safetensors"),
        "v": prompt("sd2-tiny-v.safetensors"),
        "base as eps": prompt("sd2-tiny-base.safetensors", "eps"),
        "base as v": prompt("sd2-tiny-base.safetensors", "v_prediction"),
        "v as v": prompt("sd2-tiny-v.safetensors", "v_prediction"),
        "v as eps": prompt("sd2-tiny-v.safetensors", "eps"),
    }
    images = render_in_process(workspace, cases)
    assert images["base"].shape == images["v"].shape == (64, 64, 3)
    assert images["base"].std() > 0 and images["v"].std() > 0
    assert np.array_equal(images["base"], images["base as eps"])
    assert np.array_equal(images["v"], images["v as v"])
    assert not np.array_equal(images["base"], images["base as v"])
    assert not np.array_equal(images["v"], images["v as eps"])


def test_load_checkpoint_samples_v_files_as_v(workspace, tmp_path):
    """The MODEL of Load Checkpoint / Load Diffusion Model carries the file's prediction (ComfyUI's model_type
    at load): SD2 by the norm-bias rule, SDXL by its `v_pred` and `ztsnr` marker keys; eps files are untouched."""
    from safetensors.torch import save_file

    from nodes.loaders import CheckpointLoaderSimple, UNETLoader
    from nodes.modelfns.model_options import sampling_config

    ckpts = workspace.models_dir / "checkpoints"
    sdxl = dict(load_state_dict(ckpts / "sdxl-tiny.safetensors"))
    save_file(
        {**sdxl, "v_pred": torch.tensor([]), "ztsnr": torch.tensor([])}, str(ckpts / "sdxl-tiny-vpred.safetensors")
    )
    unet = {k[len(P) :]: v for k, v in load_state_dict(ckpts / "sd2-tiny-v.safetensors").items() if k.startswith(P)}
    save_file(unet, str(workspace.models_dir / "diffusion_models" / "sd2-tiny-v-unet.safetensors"))

    def pred(name: str) -> tuple[str, bool]:
        cfg = sampling_config(CheckpointLoaderSimple().load_checkpoint(name)[0])
        return cfg["prediction"], cfg.get("zsnr", False)

    assert pred("sd2-tiny-base.safetensors") == ("eps", False)
    assert pred("sd2-tiny-v.safetensors") == ("v", False)
    assert pred("sdxl-tiny.safetensors") == ("eps", False)
    assert pred("sdxl-tiny-vpred.safetensors") == ("v", True)
    model = UNETLoader().load_unet("sd2-tiny-v-unet.safetensors", "default")[0]
    assert sampling_config(model)["prediction"] == "v"
