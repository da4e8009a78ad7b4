"""RenormCFG (nodes_lumina2), ReferenceLatent / FluxKontextMultiReferenceLatentMethod (nodes_edit_model,
nodes_flux), InstructPixToPixConditioning (nodes_ip2p) and TorchCompileModel (nodes_torch_compile) against
what ComfyUI 0.3.64 computes (fixture by scripts/record_comfyui_edit_family.py)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.lumina2 import RenormCFG
from nodes.modelfns.model_options import sampler_patches
from nodes.modelfns.model_patches import combine

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_edit_family.json").read_text())


def tensor(entry: dict) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(base64.b64decode(entry["f32"]), dtype=np.float32).copy()).reshape(
        entry["shape"])


SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))


@pytest.mark.parametrize("run", FIXTURE["renorm_cfg"]["runs"], ids=lambda r: f"{r['cfg_trunc']}-{r['renorm_cfg']}")
def test_renorm_cfg_equals_comfyui(run):
    rec = FIXTURE["renorm_cfg"]
    x, cond, uncond = tensor(rec["x"]), tensor(rec["cond"]), tensor(rec["uncond"])
    patches = sampler_patches(RenormCFG().patch(SD1, run["cfg_trunc"], run["renorm_cfg"])[0])
    out = combine(patches, cond, uncond, run["cond_scale"], x, torch.tensor([run["sigma"]]), None, ([], []))
    assert torch.allclose(out, tensor(run["out"]), atol=1e-6, rtol=1e-6)


def test_renorm_cfg_caps_each_sample_of_a_batch():
    g = torch.Generator().manual_seed(0)
    x, cond, uncond = (torch.randn(2, 4, 6, 5, generator=g) for _ in range(3))
    patches = sampler_patches(RenormCFG().patch(SD1, 100.0, 1.0)[0])
    out = combine(patches, cond, uncond, 5.0, x, torch.tensor([3.0, 3.0]), None, ([], []))
    single = [combine(patches, cond[i:i + 1], uncond[i:i + 1], 5.0, x[i:i + 1], torch.tensor([3.0]), None, ([], []))
              for i in range(2)]
    assert torch.allclose(out, torch.cat(single))


@pytest.fixture(scope="module")
def flux_model(demo_workspace):
    from nodes.loaders import UNETLoader
    from nodes.models.loader import load_diffusion_model
    return load_diffusion_model(UNETLoader().load_unet("flux-tiny.safetensors", "default")[0])


def _flux_cond(rec: dict) -> dict:
    return {"context": tensor(rec["context"]), "pooled": tensor(rec["y"]), "guidance": rec["guidance"]}


def test_flux_without_references_equals_comfyuis_flux(flux_model):
    rec = FIXTURE["flux_reference_latents"]
    with torch.no_grad():
        out = flux_model.apply(tensor(rec["x"]), torch.tensor([rec["sigma"]] * 2), _flux_cond(rec))
    assert torch.allclose(out, tensor(rec["plain"]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("run", FIXTURE["flux_reference_latents"]["runs"], ids=lambda r: f"{r['method']}-{r['refs']}")
def test_flux_reference_latents_equal_comfyuis_flux(flux_model, run):
    """ComfyUI's Flux class, built with the demo model's hyperparameters and weights, one forward pass with
    reference latents of different sizes (one of odd width) placed by each method."""
    rec = FIXTURE["flux_reference_latents"]
    cond = {**_flux_cond(rec), "ref_latents": [tensor(r).repeat(2, 1, 1, 1) for r in rec["refs"][:run["refs"]]],
            "ref_latents_method": run["method"]}
    with torch.no_grad():
        out = flux_model.apply(tensor(rec["x"]), torch.tensor([rec["sigma"]] * 2), cond)
    expected = tensor(run["out"])
    assert not torch.allclose(expected, tensor(rec["plain"]), atol=1e-3)
    assert torch.allclose(out, expected, atol=1e-5, rtol=1e-5), (out - expected).abs().max()
