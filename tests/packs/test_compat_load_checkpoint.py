"""comfy.sd.load_checkpoint (ComfyUI's loader with an LDM config YAML, used by WAS and Easy-Use): the weights
come from ckpt_path, and the config's v parameterization and CLIP layer_idx reach the MODEL and the CLIP."""

from __future__ import annotations

import pytest

from comfy_bridge import compat

compat.install()
import comfy.sd  # noqa: E402

from nodes.modelfns.model_options import sampling_config  # noqa: E402


def _config(tmp_path, params: str) -> str:
    path = tmp_path / "model.yaml"
    path.write_text("model:\n  target: ldm.models.diffusion.ddpm.LatentDiffusion\n  params:\n" + params)
    return str(path)


def test_config_v_parameterization_and_layer_idx(demo_workspace, tmp_path):
    ckpt = str(demo_workspace.models_dir / "checkpoints" / "sd1-tiny.safetensors")
    plain = comfy.sd.load_checkpoint(_config(tmp_path, "    linear_start: 0.00085\n"), ckpt)
    assert sampling_config(plain[0]).get("prediction", "eps") == "eps"
    assert plain[1].option("layer") is None
    v_yaml = _config(
        tmp_path, "    parameterization: v\n    cond_stage_config:\n      params:\n        layer_idx: -2\n"
    )
    model, clip, vae = comfy.sd.load_checkpoint(v_yaml, ckpt)
    config = sampling_config(model)
    assert (config["kind"], config["prediction"]) == ("discrete", "v")
    assert clip.option("layer") == -2
    assert vae.sources == plain[2].sources
    # A config given as a dict is used as is.
    assert (
        sampling_config(
            comfy.sd.load_checkpoint(None, ckpt, config={"model": {"params": {"parameterization": "v"}}})[0]
        )["prediction"]
        == "v"
    )


def test_missing_paths_are_named():
    with pytest.raises(ValueError, match="ckpt_path is required"):
        comfy.sd.load_checkpoint("x.yaml", None, state_dict={})
    with pytest.raises(ValueError, match="config_path"):
        comfy.sd.load_checkpoint(None, "x.safetensors")


def test_load_clip_builds_what_the_clip_loaders_build(demo_workspace):
    from comfy.sd import CLIPType

    from nodes.loaders import CLIPLoader, DualCLIPLoader

    path = str(demo_workspace.models_dir / "text_encoders" / "sd1-tiny-clip.safetensors")
    clip = comfy.sd.load_clip([path], clip_type=CLIPType.STABLE_DIFFUSION)
    assert clip.key == CLIPLoader().load_clip("sd1-tiny-clip.safetensors", "stable_diffusion")[0].key
    assert clip.tokenize("a cat") is not None  # a CLIP packs can use
    pair = comfy.sd.load_clip([path, path])  # two STABLE_DIFFUSION files: SDXL's pair, as ComfyUI detects
    expected = DualCLIPLoader().load_clip("sd1-tiny-clip.safetensors", "sd1-tiny-clip.safetensors", "sdxl")[0]
    assert (pair.arch, pair.key) == ("sdxl", expected.key)
    with pytest.raises(ValueError, match="type flux2 loads"):
        comfy.sd.load_clip([path], clip_type="flux2")
    with pytest.raises(ValueError, match="5 text encoder files"):
        comfy.sd.load_clip([path] * 5)
