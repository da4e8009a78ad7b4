"""SD2.x: the tiny 512-base (eps) and 768-v (v-prediction) checkpoints are detected, told apart and rendered,
judged by ComfyUI's own rules for SD1/SD2/SDXL ldm files (tests/models/fixtures/comfyui_sd_unet_rules.json,
read from comfyanonymous/ComfyUI comfy/model_detection.py and comfy/supported_models.py at the commits it
names)."""
from __future__ import annotations

import json
from pathlib import Path

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
    return {"model_channels": stem[0], "in_channels": stem[1],
            "context_dim": shapes[P + f"input_blocks.{n}.1.transformer_blocks.0.attn2.to_k.weight"][1],
            "use_linear_in_transformer": len(shapes[P + f"input_blocks.{n}.1.proj_in.weight"]) == 2,
            "adm_in_channels": adm[1] if adm else None}


def first_transformer_block(shapes: dict[str, tuple[int, ...]]) -> int:
    return min(int(k[len(P + "input_blocks."):].split(".")[0]) for k in shapes
               if k.startswith(P + "input_blocks.") and k.endswith(".1.proj_in.weight"))


def _real_size_shapes(family: str) -> dict[str, tuple[int, ...]]:
    """The UNet key shapes of a released checkpoint of `family`, from the published unet_config values
    (model_channels 320, channel_mult 1,2,4,4, context_dim, linear projections, SDXL's adm and depths), built
    on the meta device (nothing allocated)."""
    cfg = RULES["families"][family]
    common = {"cross_attention_dim": cfg["context_dim"], "use_linear_projection": cfg["use_linear_in_transformer"]}
    if family == "sdxl":
        common.update(block_out_channels=(320, 640, 1280), down_block_types=(
            "DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"), up_block_types=(
            "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), transformer_layers_per_block=(1, 2, 10),
            attention_head_dim=(5, 10, 20), addition_embed_type="text_time", addition_time_embed_dim=256,
            projection_class_embeddings_input_dim=cfg["adm_in_channels"])
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


@pytest.mark.parametrize("name,family", [("sd1-tiny", "sd1"), ("sdxl-tiny", "sdxl"), ("sd2-tiny-base", "sd2"),
                                         ("sd2-tiny-v", "sd2")])
def test_demo_checkpoints_read_as_comfyuis_rules_read_them(sd_files, name, family):
    """Size aside (tiny widths), each demo has the keys ComfyUI reads and the features of its family."""
    shapes, _ = shapes_of(sd_files / f"{name}.safetensors")
    n = first_transformer_block(shapes)
    assert (n == 1) == (family != "sdxl")
    read = [P + k.format(n=n) for k in RULES["keys_read"] if k != "label_emb.0.0.weight" and
            (family == "sd2" or not k.startswith("output_blocks.11."))]
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
    assert torch.std(base[P + V_MARKER].float(), unbiased=False) <= limit < torch.std(v[P + V_MARKER].float(),
                                                                                       unbiased=False)
    preds = {k: load_diffusion_model(_ref(sd_files / f"sd2-tiny-{k}.safetensors")).sampling["prediction"]
             for k in ("base", "v")}
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


def prompt(ckpt: str) -> dict:
    p = json.loads(json.dumps(BASE_PROMPT))
    p["4"]["inputs"]["ckpt_name"] = ckpt
    p["3"]["inputs"].update(steps=3)
    p["5"]["inputs"].update(width=64, height=64)
    p["9"]["inputs"]["filename_prefix"] = ckpt.split(".")[0]
    return p


def test_sd2_base_and_v_render_differently_through_the_checkpoint_loader(workspace):
    images = render_in_process(workspace, {k: prompt(f"sd2-tiny-{k}.safetensors") for k in ("base", "v")})
    assert images["base"].shape == images["v"].shape == (64, 64, 3)
    assert all(img.std() > 0 for img in images.values())
    # the weights differ in one LayerNorm bias; the v file is sampled as v-prediction, which changes every step
    assert (images["base"] != images["v"]).mean() > 0.5
