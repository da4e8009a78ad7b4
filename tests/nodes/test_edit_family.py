"""RenormCFG (nodes_lumina2), ReferenceLatent / FluxKontextMultiReferenceLatentMethod (nodes_edit_model,
nodes_flux), InstructPixToPixConditioning (nodes_ip2p) and TorchCompileModel (nodes_torch_compile) against
what ComfyUI 0.3.64 computes (fixture by scripts/record_comfyui_edit_family.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.lumina2 import RenormCFG
from nodes.modelfns.model_options import sampler_patches
from nodes.modelfns.model_patches import combine
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_edit_family.json.xz")


def write_ip2p_checkpoint(source: Path, path: Path) -> None:
    """An InstructPix2Pix-shaped SD1 checkpoint: `source` with its first convolution widened to 8 input channels
    (the 4 new ones 0.3 * randn from the fixture's seed, as the recording widens ComfyUI's copy)."""
    from safetensors.torch import load_file, save_file

    sd = load_file(str(source))
    key = "model.diffusion_model.input_blocks.0.0.weight"
    w = sd[key]
    gen = torch.Generator().manual_seed(FIXTURE["ip2p_unet"]["seed"])
    extra = 0.3 * torch.randn(w.shape[0], 4, *w.shape[2:], generator=gen)
    sd[key] = torch.cat([w, extra.to(w.dtype)], dim=1).contiguous()
    save_file(sd, str(path), metadata={"format": "pt"})


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
    single = [
        combine(patches, cond[i : i + 1], uncond[i : i + 1], 5.0, x[i : i + 1], torch.tensor([3.0]), None, ([], []))
        for i in range(2)
    ]
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
    cond = {
        **_flux_cond(rec),
        "ref_latents": [tensor(r).repeat(2, 1, 1, 1) for r in rec["refs"][: run["refs"]]],
        "ref_latents_method": run["method"],
    }
    with torch.no_grad():
        out = flux_model.apply(tensor(rec["x"]), torch.tensor([rec["sigma"]] * 2), cond)
    expected = tensor(run["out"])
    assert not torch.allclose(expected, tensor(rec["plain"]), atol=1e-3)
    assert torch.allclose(out, expected, atol=1e-5, rtol=1e-5), (out - expected).abs().max()


def test_reference_latent_and_method_nodes_shape_the_conditioning_as_comfyui():
    from nodes.library.edit_model import ReferenceLatent
    from nodes.library.flux import FluxKontextMultiReferenceLatentMethod

    rec = FIXTURE["nodes"]["reference_latent"]
    cond = [[torch.zeros(1, 3, 8), {"pooled_output": torch.zeros(1, 8)}], [torch.zeros(1, 3, 8), {}]]
    a, b = torch.randn(1, 16, 4, 4), torch.randn(1, 16, 2, 6)
    (once,) = ReferenceLatent().execute(cond, {"samples": a})
    (twice,) = ReferenceLatent().execute(once, {"samples": b})
    assert [[len(e[1]["reference_latents"]) for e in out] for out in (once, twice)] == rec["refs_per_entry"]
    assert torch.equal(twice[0][1]["reference_latents"][1], b) == rec["second_is_appended"]
    assert "reference_latents" not in cond[0][1]  # the input is not changed in place
    assert (ReferenceLatent().execute(cond)[0] is cond) == rec["without_latent_unchanged"]
    got = {
        m: FluxKontextMultiReferenceLatentMethod().execute(twice, m)[0][0][1]["reference_latents_method"]
        for m in rec["methods"]
    }
    assert got == rec["methods"]


@pytest.mark.parametrize("case", FIXTURE["nodes"]["ip2p"], ids=lambda c: "x".join(map(str, c["image"]["shape"])))
def test_instruct_pix2pix_conditioning_prepares_as_comfyui(monkeypatch, case):
    """ComfyUI's node with a stand-in VAE: the pixels it encodes (centre-cropped to multiples of 8) and the
    outputs' structure; the encoding itself is the VAE's (our demo VAE is not ComfyUI-loadable)."""
    import asyncio

    import nodes.library.inpaint as inpaint
    from nodes.library.ip2p import InstructPixToPixConditioning

    seen = {}

    async def fake_call(name, ref, role, inputs, params):
        seen["pixels"] = inputs["pixels"]
        p = inputs["pixels"]
        return {"latent": torch.randn(p.shape[0], 4, p.shape[1] // 8, p.shape[2] // 8)}

    monkeypatch.setattr(inpaint, "call_model_fn", fake_call)
    monkeypatch.setattr("nodes.library.ip2p.require_component", lambda v, *a: v)
    cond = [[torch.zeros(1, 3, 8), {"pooled_output": torch.zeros(1, 8)}], [torch.zeros(1, 3, 8), {}]]
    pos, neg, latent = asyncio.run(InstructPixToPixConditioning().encode(cond, cond[:1], tensor(case["image"]), "vae"))
    assert torch.equal(seen["pixels"], tensor(case["encoded_pixels"]))
    assert sorted(latent) == case["latent_keys"]
    assert latent["samples"].shape == tensor(case["latent_samples"]).shape and not latent["samples"].any()
    assert [sorted(e[1]) for e in pos] == case["positive_keys"]
    assert [sorted(e[1]) for e in neg] == case["negative_keys"]
    concat = pos[0][1]["concat_latent_image"]
    assert all(e[1]["concat_latent_image"] is concat for e in pos + neg) == case["concat_is_the_encoding"]
    assert latent["samples"].shape == concat.shape


@pytest.mark.parametrize("case", FIXTURE["nodes"]["ip2p_concat"], ids=lambda c: "x".join(map(str, c["noise"]["shape"])))
def test_ip2p_unet_concat_input_equals_comfyuis(demo_workspace, case):
    """What an 8-channel UNet takes beside its input: the image latent resized to the input's size and batch
    (or zeros), as ComfyUI's IP2P concat_cond."""
    from nodes.models.components import SD1_LATENT
    from nodes.models.unet import UNetModel

    model = UNetModel.__new__(UNetModel)  # the rule reads only the channel counts
    model.module, model.latent_format = SimpleNamespace(config=SimpleNamespace(in_channels=8)), SD1_LATENT
    image = None if case["image"] is None else tensor(case["image"])
    assert torch.equal(model.concat_image(image, tensor(case["noise"])), tensor(case["out"]))


def test_ip2p_unet_equals_comfyuis_ldm_unet_on_the_joined_input(demo_workspace, tmp_path):
    """The demo SD1 UNet widened to 8 input channels, given the concat latent through cond["concat"], equals
    ComfyUI's ldm UNet given the input joined with it (as its apply_model joins c_concat)."""
    import hashlib

    from nodes.loaders import make_ref
    from nodes.models.loader import load_diffusion_model

    rec = FIXTURE["ip2p_unet"]
    source = demo_workspace.root / "models" / "checkpoints" / "sd1-tiny.safetensors"
    assert hashlib.sha256(source.read_bytes()).hexdigest() == rec["checkpoint_sha256"], (
        "the demo checkpoint changed: re-record the fixture"
    )
    path = tmp_path / "ip2p.safetensors"
    write_ip2p_checkpoint(source, path)
    unet = load_diffusion_model(make_ref("diffusion_model", "sd1", [path]))
    assert unet.concat_image(None, tensor(rec["x"])) is not None  # it takes a concat input
    with torch.no_grad():
        out = unet.apply(
            tensor(rec["x"]),
            torch.full((2,), rec["t"]),
            {"context": tensor(rec["context"]), "concat": tensor(rec["concat"])},
        )
    expected = tensor(rec["out"])
    assert torch.allclose(out, expected, atol=2e-5, rtol=1e-4), float((out - expected).abs().max())
