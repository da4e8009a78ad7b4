"""A ControlNet that cannot apply is refused by name, never left out (issue 38: a Qwen-Image template "rendered" with
a LoRA file given to ControlNetLoader, and no ControlNet code ran).

What happened there: the file was not in the controlnet folder, so validation failed ControlNetLoader's outputs and,
as in ComfyUI, the prompt ran the outputs that did not depend on it (the template's mask previews); the render script
took that for a render. Now templates_render asks run_prompt for every output (`all_outputs`), ControlNetLoader and
comfy.controlnet.load_controlnet refuse a file that holds no ControlNet when they run (a node pack calling them skips
validation), and a sampler refuses a ControlNet of another model family before its first step."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch
from safetensors.torch import save_file

from cluster.refs import ModelRef
from nodes.conditioning import ControlSpec
from nodes.ksampler import common_ksampler
from nodes.loaders import ControlNetLoader
from nodes.workspace import Workspace, activate
from scripts import templates_render

LORA_KEYS = {  # a kohya SD1 LoRA: what the detector calls a LoRA, not a ControlNet
    "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": torch.zeros(4, 32),
    "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": torch.zeros(32, 4),
}


@pytest.fixture
def workspace(tmp_path):
    ws = activate(Workspace(tmp_path).create())
    (ws.models_dir / "controlnet").mkdir(parents=True, exist_ok=True)
    save_file(LORA_KEYS, str(ws.models_dir / "controlnet" / "a_lora.safetensors"))
    return ws


def test_controlnet_loader_refuses_a_file_without_a_controlnet(workspace):
    with pytest.raises(ValueError, match=r"control_net_name: a_lora\.safetensors is a lora file \(sd1\), not a Con"):
        ControlNetLoader().load_controlnet("a_lora.safetensors")


def test_comfy_load_controlnet_refuses_it_too(workspace):
    from comfy_bridge.compat.comfy.controlnet import load_controlnet

    with pytest.raises(ValueError, match="ckpt_path: a_lora.safetensors is a lora file"):
        load_controlnet(workspace.models_dir / "controlnet" / "a_lora.safetensors")


def _ref(component: str, arch: str, name: str) -> ModelRef:
    return ModelRef(component=component, arch=arch, sources=(f"/models/{name}",), digests=(name,))


def test_a_controlnet_of_another_family_is_refused_before_sampling():
    """An SD1 ControlNet on an SDXL model (before: a shape error inside the first step) or on a Qwen-Image model:
    refused by the sampler, naming the input, the file and both families."""
    hint = torch.zeros(1, 64, 64, 3)
    latent = {"samples": torch.zeros(1, 4, 8, 8)}
    for model_arch in ("sdxl", "qwen_image"):
        control = ControlSpec(_ref("controlnet", "sd1", "canny_sd15.safetensors"), hint, 1.0)
        positive = [[torch.zeros(1, 77, 2048), {"control": control}]]
        negative = [[torch.zeros(1, 77, 2048), {}]]
        model = _ref("diffusion_model", model_arch, "model.safetensors")
        with pytest.raises(
            ValueError,
            match=rf"positive: the ControlNet canny_sd15\.safetensors is a sd1 ControlNet and cannot apply to this "
            rf"{model_arch} model",
        ):
            asyncio.run(common_ksampler(model, 0, 2, 1.0, "euler", "simple", positive, negative, latent))


def _prompt() -> dict:
    """One output that validates (an empty image saved) and one behind a ControlNetLoader whose file is missing."""
    return {
        "img": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}},
        "save": {"class_type": "SaveImage", "inputs": {"images": ["img", 0], "filename_prefix": "ok"}},
        "cn": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": "missing.safetensors"}},
        "show": {"class_type": "PreviewAny", "inputs": {"source": ["cn", 0]}},
    }


def test_a_template_render_fails_when_an_output_fails_validation(workspace, tmp_path, monkeypatch):
    """The render of a template counts only when every output ran; ComfyUI's own partial run is kept for the
    server and the run command (the valid output still runs there)."""
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    registry = build_registry(workspace, load_custom_nodes=False)
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "t.json").write_text(json.dumps({"nodes": [], "links": []}))
    monkeypatch.setattr(templates_render.templates_coverage, "templates_dir", lambda: templates)
    monkeypatch.setattr(templates_render, "tiny_prompt", lambda workflow, registry, loras: (_prompt(), []))
    result = templates_render.render_one("t", registry)
    assert result["renders"] is False
    assert result["render_error"].startswith("SystemExit: node cn (ControlNetLoader): Value not in list")
    (image,) = asyncio.run(run_prompt(_prompt(), None, registry, show_progress=False))
    assert image.name.startswith("ok")
