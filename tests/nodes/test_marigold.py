"""Marigold V2's new pieces (issue 38): Marigold V2 Post-Process and ModelSamplingAuraFlow's `sampling`
img_to_img_velocity, against today's ComfyUI's module code (tests/nodes/fixtures/comfyui_marigold.json, recorded by
scripts/record_comfyui_marigold.py): the post-processing of each prediction, and the templates' one Euler step
(ManualSigmas "0.5, 0", DisableNoise) with a stand-in network, so that the parameterisation (the network sees the
encoded image unscaled, x0 = input - v) and the timestep it is given are what is compared. The interface is the one
today's ComfyUI's source declares (no recording of it exists: ComfyUI 0.10.0 predates Marigold V2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.marigold import MarigoldV2PostProcess
from nodes.library.model_advanced import ModelSamplingAuraFlow
from nodes.modelfns.model_options import sampling_config
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.samplers import sample
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).resolve().parent / "fixtures" / "comfyui_marigold.json").read_text())
QWEN = ModelRef("diffusion_model", "qwen_image", ("qwen.safetensors",), ("0" * 64,))


def test_object_info_has_todays_interface():
    from comfy_bridge.registry import build_registry

    info = json.loads(json.dumps(build_registry(None, load_custom_nodes=False).node_info("MarigoldV2PostProcess")))
    assert info["input"]["required"] == {
        "image": ["IMAGE", {}],
        "prediction": ["COMBO", {"multiselect": False, "options": ["depth", "normals", "albedo"]}],
    }
    assert (info["output"], info["output_name"], info["display_name"]) == (
        ["IMAGE"],
        ["IMAGE"],
        "Marigold V2 Post-Process",
    )
    assert (info["category"], info["python_module"]) == ("image/geometry estimation", "comfy_extras.nodes_marigold")


@pytest.mark.parametrize("case", FIXTURE["post_process"], ids=lambda c: f"{c['image']}-{c['prediction']}")
def test_post_process_matches_comfyui(case):
    (out,) = MarigoldV2PostProcess().execute(tensor(FIXTURE["images"][case["image"]]), case["prediction"])
    want = tensor(case["out"])
    assert out.shape == want.shape
    assert (out - want).abs().max().item() <= 1e-6


def test_unknown_prediction_is_named():
    with pytest.raises(ValueError, match="prediction: unknown value 'disparity'"):
        MarigoldV2PostProcess().execute(torch.zeros(1, 2, 2, 3), "disparity")


@pytest.mark.parametrize("case", FIXTURE["sampling"], ids=lambda c: c["sampling"])
def test_template_step_matches_comfyui(case):
    (model,) = ModelSamplingAuraFlow().patch_aura(QWEN, case["shift"], case["sampling"])
    ms = model_sampling_from_config(sampling_config(model))
    sigmas = torch.tensor(FIXTURE["sigmas"])
    assert float(ms.timestep(sigmas[:1])) == case["timestep"]

    def denoiser(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        t = ms.timestep(sigma).view(-1, *([1] * (x.ndim - 1)))
        return ms.calculate_denoised(sigma, 0.25 * ms.calculate_input(sigma, x) + 0.1 * t, x)

    latent = tensor(case["latent"])
    x = ms.noise_scaling(sigmas[0], torch.zeros_like(latent), latent)
    x = ms.inverse_noise_scaling(sigmas[-1], sample(denoiser, x, sigmas, "euler", 0, model_sampling=ms))
    assert (x - tensor(case["out"])).abs().max().item() <= 1e-6


def test_unknown_aura_sampling_is_named():
    with pytest.raises(ValueError, match="sampling: unknown value 'x0'"):
        ModelSamplingAuraFlow().patch_aura(QWEN, 1.73, "x0")


def test_int8_convrot_transformer_loads_dequantized(tmp_path):
    """Marigold V2's base model is ComfyUI's int8 ConvRot Qwen-Image-Edit 2509 file: UNETLoader's Qwen-Image path
    dequantizes each layer by comfy-kitchen's layout (what ComfyUI's ops run), close to the float weights it came
    from (int8 rounding)."""
    from safetensors.torch import load_file

    from nodes.loaders import make_ref
    from nodes.models.comfy_quant import dequantize
    from nodes.models.loader import load_diffusion_model
    from nodes.models.marigold_demo import build_demo_marigold
    from nodes.models.qwen_image_demo import tiny_qwen_image_state_dicts

    path = build_demo_marigold(tmp_path)[0]
    stored = load_file(str(path))
    key = "transformer_blocks.0.attn.to_q.weight"
    assert stored[key].dtype == torch.int8
    model = load_diffusion_model(make_ref("diffusion_model", "qwen_image", [path]))
    got = model.module.state_dict()[key].float()
    assert torch.equal(got, dequantize(stored, str(path), torch.float32)[key])
    original = tiny_qwen_image_state_dicts()["transformer"][key].float()
    # int8 rounding of the rotated rows: measured 1.4e-3 against weights up to 8.8e-2
    assert (got - original).abs().max() <= original.abs().max() / 32
