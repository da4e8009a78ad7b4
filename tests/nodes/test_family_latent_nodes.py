"""Model-free nodes of families not run here yet (Mochi, Cosmos, Stable Cascade, Hunyuan Image, Qwen-Image-Layered,
SD x4 upscaler): their outputs equal upstream ComfyUI 0.10.0's (tests/nodes/fixtures/comfyui_family_latents.json,
recorded by scripts/record_comfyui_family_latents.py); their interfaces are checked by test_object_info_matches_comfyui."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from record_comfyui_family_latents import inputs  # noqa: E402  (the recording's own inputs)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_family_latents.json").read_text())


def _node(name: str):
    return nodes.NODE_CLASS_MAPPINGS[name]()


def _latent(latent: dict) -> dict:
    return {
        "keys": sorted(latent),
        "samples": {"shape": list(latent["samples"].shape), "zero": not latent["samples"].any().item()},
    }


@pytest.mark.parametrize("case", FIXTURE["empty"], ids=lambda c: f"{c['node']}-{c['inputs']['width']}")
def test_empty_latents_equal_comfyui_0_10(case):
    node = _node(case["node"])
    outputs = getattr(node, node.FUNCTION)(**case["inputs"])
    assert [_latent(o) for o in outputs] == case["outputs"]


def test_stage_b_conditioning_carries_the_stage_c_latent():
    x = inputs()
    conditioning = [[x["cond"], {"pooled_output": x["pooled"]}]]
    (out,) = _node("StableCascade_StageB_Conditioning").execute(conditioning, {"samples": x["stage_c"]})
    assert sorted(out[0][1]) == FIXTURE["stage_b"]["keys"]
    assert out[0][1]["stable_cascade_prior"] is x["stage_c"]
    assert "stable_cascade_prior" not in conditioning[0][1]  # the input is left as it was


@pytest.mark.parametrize("case", FIXTURE["sd4x"], ids=lambda c: str(c["scale_ratio"]))
def test_sd_x4_upscale_conditioning_equals_comfyui_0_10(case):
    torch.set_num_threads(1)
    x = inputs()
    conditioning = [[x["cond"], {"pooled_output": x["pooled"]}]]
    node = _node("SD_4XUpscale_Conditioning")
    if "error" in case:  # ComfyUI divides by zero; here the error names the too small output
        with pytest.raises(ValueError, match="at least 4 pixels"):
            node.execute(x["image"], conditioning, conditioning, case["scale_ratio"], case["noise_augmentation"])
        return
    pos, neg, latent = node.execute(
        x["image"], conditioning, conditioning, case["scale_ratio"], case["noise_augmentation"]
    )
    assert [sorted(pos[0][1]), sorted(neg[0][1])] == [case["positive_keys"], case["negative_keys"]]
    expected = torch.tensor(case["concat_image"]["values"]).reshape(case["concat_image"]["shape"])
    assert torch.equal(pos[0][1]["concat_image"], expected)
    assert pos[0][1]["noise_augmentation"] == case["noise_augmentation"]
    assert _latent(latent) == case["latent"]
