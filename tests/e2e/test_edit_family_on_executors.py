"""RenormCFG, ReferenceLatent (+ FluxKontextMultiReferenceLatentMethod) and InstructPixToPixConditioning end to
end: each changes the image, and two executors give the in-process images (the patch, the reference latents
and the concat latent travel as data into the denoise steps). The InstructPix2Pix model is the demo SD1
checkpoint with its first convolution widened to 8 input channels, written for this module only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.e2e.test_samplers_on_executors import REPO, differing_cases, render_in_process, render_on_server
from tests.nodes.test_edit_family import write_ip2p_checkpoint

SD1 = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
FLUX = json.loads((REPO / "workflows_json" / "flux.json").read_text())
IP2P_CKPT = "zz-ip2p-tiny.safetensors"


def _sd1(case: str, ckpt: str = "sd1-tiny.safetensors") -> dict:
    prompt = json.loads(json.dumps(SD1))
    prompt["3"]["inputs"].update(steps=4)
    prompt["4"]["inputs"]["ckpt_name"] = ckpt
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"edit_{case}"
    return prompt


def _renorm(case: str, cfg_trunc: float, renorm_cfg: float) -> dict:
    prompt = _sd1(case)
    prompt["20"] = {
        "class_type": "RenormCFG",
        "inputs": {"model": ["4", 0], "cfg_trunc": cfg_trunc, "renorm_cfg": renorm_cfg},
    }
    prompt["3"]["inputs"]["model"] = ["20", 0]
    return prompt


def _flux(case: str, refs: int = 0, method: str | None = None) -> dict:
    prompt = json.loads(json.dumps(FLUX))
    prompt["3"]["inputs"].update(steps=4)
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"edit_{case}"
    prompt["30"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
    prompt["31"] = {
        "class_type": "EmptyImage",
        "inputs": {"width": 48, "height": 32, "batch_size": 1, "color": 0x3366CC},
    }
    last = ["13", 0]
    for k, image in enumerate((["30", 0], ["31", 0])[:refs]):
        prompt[f"4{k}"] = {"class_type": "VAEEncode", "inputs": {"pixels": image, "vae": ["12", 0]}}
        prompt[f"5{k}"] = {"class_type": "ReferenceLatent", "inputs": {"conditioning": last, "latent": [f"4{k}", 0]}}
        last = [f"5{k}", 0]
    if method is not None:
        prompt["60"] = {
            "class_type": "FluxKontextMultiReferenceLatentMethod",
            "inputs": {"conditioning": last, "reference_latents_method": method},
        }
        last = ["60", 0]
    prompt["3"]["inputs"]["positive"] = last
    return prompt


def _ip2p(case: str, image: bool) -> dict:
    prompt = _sd1(case, IP2P_CKPT)
    if image:
        prompt["30"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
        prompt["31"] = {
            "class_type": "InstructPixToPixConditioning",
            "inputs": {"positive": ["6", 0], "negative": ["7", 0], "vae": ["4", 2], "pixels": ["30", 0]},
        }
        prompt["3"]["inputs"].update(positive=["31", 0], negative=["31", 1], latent_image=["31", 2])
    return prompt


CASES = {
    "sd1_plain": _sd1("sd1_plain"),
    "renorm": _renorm("renorm", 100.0, 1.0),
    "renorm_truncated": _renorm("renorm_truncated", 0.0, 1.0),
    "flux_plain": _flux("flux_plain"),
    "flux_ref": _flux("flux_ref", 1),
    "flux_two_refs": _flux("flux_two_refs", 2),
    "flux_two_refs_offset": _flux("flux_two_refs_offset", 2, "offset"),
    "flux_two_refs_index": _flux("flux_two_refs_index", 2, "index"),
    "flux_two_refs_uxo": _flux("flux_two_refs_uxo", 2, "uxo/uno"),
    "ip2p_no_image": _ip2p("ip2p_no_image", False),
    "ip2p": _ip2p("ip2p", True),
}


@pytest.fixture(scope="module")
def ip2p_checkpoint(demo_workspace):
    """sd1-tiny with 4 more input channels in a checkpoint of its own, removed afterwards."""
    path = demo_workspace.models_dir / "checkpoints" / IP2P_CKPT
    write_ip2p_checkpoint(demo_workspace.models_dir / "checkpoints" / "sd1-tiny.safetensors", path)
    yield path
    path.unlink()


@pytest.fixture(scope="module")
def in_process_images(demo_workspace, ip2p_checkpoint) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, CASES)


@pytest.mark.parametrize(
    "case,plain",
    [
        ("renorm", "sd1_plain"),
        ("renorm_truncated", "sd1_plain"),
        ("renorm", "renorm_truncated"),
        ("flux_ref", "flux_plain"),
        ("flux_two_refs", "flux_ref"),
        ("flux_two_refs_index", "flux_two_refs"),
        ("flux_two_refs_uxo", "flux_two_refs"),
        ("ip2p", "ip2p_no_image"),
    ],
)
def test_each_node_changes_the_image(in_process_images, case, plain):
    assert not np.array_equal(in_process_images[case], in_process_images[plain])


def test_offset_is_the_default_reference_method(in_process_images):
    assert np.array_equal(in_process_images["flux_two_refs_offset"], in_process_images["flux_two_refs"])


def test_two_executors_give_the_in_process_images(serve, in_process_images):
    base = serve("--executors", "2", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, CASES), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
