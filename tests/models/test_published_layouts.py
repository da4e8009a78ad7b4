"""The DiT demo files are in the layouts their authors publish, judged by code we did not write: diffusers'
single-file converters (tests/models/fixtures/published_transformer_layouts.json names them and the version)
convert each demo transformer with no key left over or missing, into exactly the keys and shapes of the
diffusers model it was built from; our detection names the family of each. SD1/SD2/SDXL: tests/models/test_sd2.py
(ComfyUI's detection rules)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from diffusers.loaders import single_file_utils

from nodes.models import flux2_demo, flux_demo, sd3_demo, zimage_demo
from nodes.models.detect import classify

LAYOUTS = json.loads((Path(__file__).parent / "fixtures" / "published_transformer_layouts.json").read_text())


def _sd3_reference() -> torch.nn.Module:
    from diffusers import (
        SD3Transformer2DModel,  # the demo's own arguments (nodes/models/sd3_demo.py)
    )

    return SD3Transformer2DModel(
        sample_size=64,
        patch_size=2,
        in_channels=16,
        num_layers=2,
        attention_head_dim=64,
        num_attention_heads=2,
        joint_attention_dim=4096,
        caption_projection_dim=128,
        pooled_projection_dim=32 + 48,
        out_channels=16,
        pos_embed_max_size=32,
    )


def _demo(family: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(the demo's transformer file tensors, the state dict of the diffusers model they were made from)."""
    if family == "flux2":
        return flux2_demo.tiny_flux2_state_dicts()["transformer"], flux2_demo.tiny_transformer().state_dict()
    if family == "zimage":
        return zimage_demo.tiny_zimage_state_dicts(0)["transformer"], zimage_demo.tiny_transformer(0).state_dict()
    return sd3_demo.tiny_sd3_state_dicts()["mmdit"], _sd3_reference().state_dict()


def _convert(family: str, sd: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """diffusers' conversion of `sd` and the keys it left unread."""
    left = dict(sd)
    out = getattr(single_file_utils, LAYOUTS["families"][family]["converter"])(left)
    return out, sorted(left)


@pytest.mark.parametrize("family", ["flux2", "sd3", "zimage"])
def test_demo_transformer_converts_as_a_published_file(family):
    file_sd, reference = _demo(family)
    out, left = _convert(family, file_sd)
    assert left == []
    assert {k: tuple(v.shape) for k, v in out.items()} == {k: tuple(v.shape) for k, v in reference.items()}
    assert classify({k: tuple(v.shape) for k, v in file_sd.items()}, f"{family}.safetensors").arch == family


def _templates(keys) -> set[str]:
    return {re.sub(r"(blocks)\.\d+\.", r"\1.{i}.", k) for k in keys}


def test_flux_demo_has_the_released_keys_and_converts_at_real_size():
    """The Flux converter assumes the released width, so the layout is checked at real size (FLUX.1-dev's
    config on the meta device, nothing allocated), and the demo by the same key names, block numbers aside."""
    from diffusers import FluxTransformer2DModel

    from nodes.models.flux_keys import diffusers_to_bfl

    with torch.device("meta"):
        real = FluxTransformer2DModel(guidance_embeds=True).state_dict()
    real_file = diffusers_to_bfl(real)
    out, left = _convert("flux", real_file)
    assert left == []
    assert {k: tuple(v.shape) for k, v in out.items()} == {k: tuple(v.shape) for k, v in real.items()}
    demo = flux_demo.tiny_flux_state_dicts(0)["transformer"]
    assert _templates(demo) == _templates(real_file)
    assert set(LAYOUTS["families"]["flux"]["comfyui_reads"]) <= demo.keys()
    for sd in (real_file, demo):
        assert classify({k: tuple(v.shape) for k, v in sd.items()}, "flux.safetensors").arch == "flux"


def test_sd3_demo_has_the_keys_comfyui_reads():
    assert set(LAYOUTS["families"]["sd3"]["comfyui_reads"]) <= _demo("sd3")[0].keys()
