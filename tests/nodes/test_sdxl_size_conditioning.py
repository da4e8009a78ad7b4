"""SDXL's size conditioning reaches the UNet as ComfyUI builds it: for each recorded entry
(tests/nodes/fixtures/comfyui_sdxl_adm.json.xz, ComfyUI 0.3.64's SDXL.encode_adm via
scripts/record_comfyui_sdxl_adm.py) the time_ids our denoise step hands the demo SDXL UNet, embedded by that
UNet's own size projection and put after the pooled embedding as the UNet does, equal ComfyUI's adm vector
within 4 float32 ulps of the largest size given (the sizes an entry lacks default to the latent's size in pixels,
no crop). The embedding is sin/cos of (size x frequency): the frequencies (an exp) and so the arguments round by an
ulp differently on different CPUs (ComfyUI's own vector on an AVX-512 machine differs from one recorded elsewhere),
and sin/cos pass an argument's error through, so the comparison is in ulps of the sizes, not of the bytes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from nodes.conditioning import flatten
from nodes.modelfns.denoise import DenoiseParams, GuidedDenoiser
from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_sdxl_adm.json.xz")


def pooled() -> torch.Tensor:
    """The recording's pooled embedding (integer arithmetic: the same values in any process)."""
    return (((torch.arange(32) * 37 + 11) % 256).float() / 255.0).reshape(1, 32)


@pytest.fixture(scope="module")
def size_projection(demo_workspace):
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.models.loader import load_diffusion_model

    model, _, _ = CheckpointLoaderSimple().load_checkpoint("sdxl-tiny.safetensors")
    unet = load_diffusion_model(model).module
    assert unet.config.addition_time_embed_dim == 256
    return unet.add_time_proj


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"{sorted(c['options'])}-{c['latent_hw']}")
def test_time_ids_embed_to_comfyuis_adm(case, size_projection):
    h, w = case["latent_hw"]
    _, entries = flatten(
        "positive", [[torch.zeros(1, 77, 8), {"pooled_output": pooled(), **case["options"]}]], lambda p: 1.0 - p
    )
    denoiser = GuidedDenoiser(
        SimpleNamespace(arch="sdxl"),
        None,
        {},
        DenoiseParams(
            sampler="euler",
            seed=0,
            cfg=1.0,
            model_sampling={},
            positive=entries,
            negative=[],
            image_size=(h * 8, w * 8),
        ),
        load_control=None,
    )
    time_ids = denoiser._batch_cond(entries, 1, torch.device("cpu"))["time_ids"]
    adm = torch.cat([pooled(), size_projection(time_ids.flatten()).reshape(1, -1)], dim=-1).float().contiguous()
    theirs = tensor(case["adm"])
    assert list(adm.shape) == case["shape"] == list(theirs.shape)
    diff = (adm - theirs).abs().max().item()
    bound = max(ulps_of_largest(theirs, 4), ulps_of_largest(time_ids, 4))
    assert diff <= bound, f"max abs diff {diff}; first size values {adm[0, 32:36].tolist()}"
