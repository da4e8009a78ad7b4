"""SD3 end to end on the tiny demo SD3: checkpoint and TripleCLIPLoader prompts through our engine, with
CLIPTextEncode, CLIPTextEncodeSD3, SkipLayerGuidanceSD3 and ControlNetApplySD3, in process and on
`serve --executors 2`."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.test_samplers_on_executors import differing_cases, render_in_process, render_on_server

CKPT = "sd3-tiny.safetensors"
TEXT = "a (red:1.2) cube on a wooden table"


def sd3_prompt(
    encoder: str = "plain", l: str = TEXT, g: str = TEXT, t5: str = TEXT, padding: str = "empty_prompt"
) -> dict:
    """KSampler on the tiny SD3; `encoder` plain: CLIPTextEncode with the checkpoint's CLIP; sd3:
    CLIPTextEncodeSD3 (positive) with TripleCLIPLoader's CLIP."""
    p = {
        "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CKPT}},
        "neg": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "blurry"}},
        "latent": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 64, "height": 48, "batch_size": 1}},
        "sample": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["ckpt", 0],
                "positive": ["pos", 0],
                "negative": ["neg", 0],
                "latent_image": ["latent", 0],
                "seed": 5,
                "steps": 4,
                "cfg": 4.0,
                "sampler_name": "euler",
                "scheduler": "simple",
                "denoise": 1.0,
            },
        },
        "decode": {"class_type": "VAEDecode", "inputs": {"samples": ["sample", 0], "vae": ["ckpt", 2]}},
        "save": {"class_type": "SaveImage", "inputs": {"images": ["decode", 0], "filename_prefix": "sd3"}},
    }
    if encoder == "plain":
        p["pos"] = {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": TEXT}}
    else:
        p["triple"] = {
            "class_type": "TripleCLIPLoader",
            "inputs": {
                "clip_name1": "sd3-tiny-t5.safetensors",
                "clip_name2": "sd3-tiny-clip_l.safetensors",
                "clip_name3": "sd3-tiny-clip_g.safetensors",
            },
        }
        p["pos"] = {
            "class_type": "CLIPTextEncodeSD3",
            "inputs": {"clip": ["triple", 0], "clip_l": l, "clip_g": g, "t5xxl": t5, "empty_padding": padding},
        }
    return p


def with_slg(prompt: dict, node: str) -> dict:
    """The prompt's model through SkipLayerGuidanceSD3 or, given the same settings, SkipLayerGuidanceDiT."""
    inputs = {"model": ["ckpt", 0], "scale": 3.0, "start_percent": 0.0, "end_percent": 1.0}
    inputs.update(
        {"layers": "1"}
        if node == "SkipLayerGuidanceSD3"
        else {"double_layers": "1", "single_layers": "", "rescaling_scale": 0.0}
    )
    prompt = {**prompt, "slg": {"class_type": node, "inputs": inputs}}
    prompt["sample"] = {**prompt["sample"], "inputs": {**prompt["sample"]["inputs"], "model": ["slg", 0]}}
    return prompt


def with_controlnet(prompt: dict, node: str) -> dict:
    """The prompt's conditioning through the tiny SD3 ControlNet (hint: the example image, VAE-encoded)."""
    prompt = {
        **prompt,
        "cn": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": "sd3-tiny-controlnet.safetensors"}},
        "image": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "apply": {
            "class_type": node,
            "inputs": {
                "positive": ["pos", 0],
                "negative": ["neg", 0],
                "control_net": ["cn", 0],
                "vae": ["ckpt", 2],
                "image": ["image", 0],
                "strength": 0.8,
                "start_percent": 0.0,
                "end_percent": 1.0,
            },
        },
    }
    prompt["sample"] = {
        **prompt["sample"],
        "inputs": {**prompt["sample"]["inputs"], "positive": ["apply", 0], "negative": ["apply", 1]},
    }
    return prompt


def prompts() -> dict[str, dict]:
    return {
        "plain": sd3_prompt(),
        "sd3": sd3_prompt("sd3"),
        "slg": with_slg(sd3_prompt(), "SkipLayerGuidanceSD3"),
        "slg_dit": with_slg(sd3_prompt(), "SkipLayerGuidanceDiT"),
        "controlnet": with_controlnet(sd3_prompt(), "ControlNetApplySD3"),
        "controlnet_advanced": with_controlnet(sd3_prompt(), "ControlNetApplyAdvanced"),
        "sd3_no_t5": sd3_prompt("sd3", t5="", padding="none"),
        "sd3_t5_only": sd3_prompt("sd3", l="", g="", padding="none"),
        "sd3_empty_t5_padded": sd3_prompt("sd3", t5="", padding="empty_prompt"),
    }


@pytest.fixture(scope="module")
def local(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, prompts())


def test_sd3_prompts_render_and_encoders_agree(local) -> None:
    # The three prompts given to CLIPTextEncodeSD3 encode as CLIPTextEncode's one (same weights, same tokens).
    assert np.array_equal(local["plain"], local["sd3"])
    assert local["plain"].shape == (48, 64, 3) and local["plain"].std() > 0
    # Skip-layer guidance on the joint blocks changes the image, exactly as SkipLayerGuidanceDiT's double blocks.
    assert np.array_equal(local["slg"], local["slg_dit"]) and not np.array_equal(local["slg"], local["plain"])
    # The SD3 ControlNet changes the image; Apply ControlNet given the VAE applies it alike.
    assert np.array_equal(local["controlnet"], local["controlnet_advanced"])
    assert not np.array_equal(local["controlnet"], local["plain"])
    others = [local[k] for k in ("sd3_no_t5", "sd3_t5_only", "sd3_empty_t5_padded")]
    for i, image in enumerate(others):
        assert not np.array_equal(image, local["sd3"])
        assert all(not np.array_equal(image, other) for other in others[i + 1 :])


def test_sd3_prompts_on_two_executors_give_the_in_process_images(serve, local) -> None:
    base = serve("--executors", "2", "--executor-threads", "1")
    assert not differing_cases(render_on_server(base, prompts()), local)
