"""The SDXL refiner: told from SDXL base by its published layout, its CLIP-G-only text encoder, and its size
conditioning (with the aesthetic score, by prompt type) and UNet evaluation equal to ComfyUI 0.10.0's (fixture
from scripts/record_comfyui_sdxl_refiner.py on the demo's tiny refiner checkpoint)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, file_digest
from nodes.conditioning import flatten
from nodes.modelfns.denoise import DenoiseParams, GuidedDenoiser
from nodes.models import clip as clip_mod
from nodes.models.demo import _sdxl_refiner, save_tiny
from nodes.models.detect import probe
from nodes.models.loader import load_diffusion_model, load_text_encoder
from nodes.models.unet import is_refiner
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_sdxl_refiner.json").read_text())
# ComfyUI's comfy/supported_models.py: SDXLRefiner's unet_config (the published sd_xl_refiner_1.0 file) and SDXL's;
# the refiner's clip state dict is conditioner.embedders.0.model.* (process_clip_state_dict), OpenCLIP bigG alone.
PUBLISHED = {
    "refiner": {"context_dim": 1280, "adm_in_channels": 2560},
    "base": {"context_dim": 2048, "adm_in_channels": 2816},
}


@pytest.fixture(scope="module")
def refiner_file(tmp_path_factory) -> str:
    torch.set_num_threads(1)
    path = save_tiny(_sdxl_refiner(), tmp_path_factory.mktemp("models") / "sdxl-refiner-tiny.safetensors")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["weights_sha256"]
    return str(path)


def _ref(component: str, path: str) -> ModelRef:
    return ModelRef(component, "sdxl", (path,), (file_digest(path),))


@pytest.fixture(scope="module")
def refiner(refiner_file):
    return load_diffusion_model(_ref("diffusion_model", refiner_file))


def test_the_published_sizes_tell_the_refiner_from_base():
    assert is_refiner(**{"adm_in": 2560, "context_dim": 1280})
    assert not is_refiner(**{"adm_in": 2816, "context_dim": 2048})
    assert {k: PUBLISHED["refiner"][k] for k in ("context_dim", "adm_in_channels")} == {
        "context_dim": 1280,
        "adm_in_channels": 2560,
    }
    tiny = FIXTURE["unet_config"]  # what ComfyUI's detection read from the tiny file
    assert is_refiner(tiny["adm_in_channels"], tiny["context_dim"])


def test_the_checkpoint_loads_as_a_refiner_with_clip_g_alone(refiner_file, refiner):
    info = probe(refiner_file)
    assert (info.arch, info.kind) == ("sdxl", "checkpoint")
    assert refiner.refiner and refiner.arch == "sdxl"
    clip = load_text_encoder(_ref("text_encoder", refiner_file))
    assert clip.arch == "sdxl_refiner" and list(clip.sides) == ["g"]
    cond, pooled = clip.encode(clip.tokenize("a glass bottle"))
    # as ComfyUI's SDXLRefinerClipModel: CLIP-G's penultimate states unnormed, its projected pooled output
    side = clip.sides["g"]
    assert side.spec == clip_mod.ClipSpec("g", "gelu", False, -2, False, True)
    assert cond.shape == (1, 77, 48) and pooled.shape == (1, 48)


def _time_ids(case: dict, entries: list[dict], model) -> torch.Tensor:
    h, w = case["latent_hw"]
    params = DenoiseParams(
        sampler="euler",
        seed=0,
        cfg=1.0,
        model_sampling={},
        positive=entries if case["prompt_type"] == "positive" else [],
        negative=entries if case["prompt_type"] == "negative" else [],
        image_size=(h * 8, w * 8),
    )
    return GuidedDenoiser(model, None, {}, params, load_control=None)._batch_cond(entries, 1, torch.device("cpu"))


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: c["name"])
def test_size_conditioning_and_evaluation_equal_comfyuis(refiner, case):
    pooled, context, x = tensor(case["pooled"]), tensor(case["context"]), tensor(case["x"])
    _, entries = flatten(case["prompt_type"], [[context, {"pooled_output": pooled, **case["options"]}]], lambda p: 1.0)
    cond = _time_ids(case, entries, refiner)
    unet = refiner.module
    adm = torch.cat([pooled, unet.add_time_proj(cond["time_ids"].flatten()).reshape(1, -1)], dim=-1)
    # The size embedding is sin/cos of (size x frequency): the frequencies (an exp) and so the arguments round by an
    # ulp differently on different CPUs (the fixture was recorded on another; here up to 5.8e-5 apart where the sizes
    # are 1024, whose ulp is 6.1e-5), and sin/cos pass an argument's error through. So the vector is compared within 4
    # float32 ulps of the largest size given (and of its own largest value), not bit for bit.
    theirs_adm = tensor(case["adm"])
    assert adm.shape == theirs_adm.shape
    bound = max(ulps_of_largest(theirs_adm, 4), ulps_of_largest(cond["time_ids"], 4))
    assert (adm - theirs_adm).abs().max().item() <= bound
    ms = model_sampling_from_config(refiner.sampling)
    sigma = torch.tensor([case["sigma"]])
    with torch.no_grad():
        eps = refiner.apply(
            ms.calculate_input(sigma, x), ms.timestep(sigma), cond | {"context": context, "pooled": pooled}
        )
    denoised = ms.calculate_denoised(sigma, eps, x)
    # A whole UNet evaluation recorded on another CPU: float32 rounding accumulates through its layers, so the bound
    # is 1e-5 or 64 ulps of the largest value where that is more (measured on an AVX-512 CPU: up to 2.2e-5 at a
    # largest value of 9.3, 23 ulps).
    expected = tensor(case["denoised"])
    diff = (denoised - expected).abs().max().item()
    assert diff <= max(1e-5, ulps_of_largest(expected, 64)), diff
