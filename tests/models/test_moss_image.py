"""MOSS-Image transformer: the tiny file in ComfyUI's layout is detected and loads, and one evaluation equals an
independent implementation of the official model (moss-image-mlx 0.2.0 on MLX's CPU backend, fixture from
scripts/record_moss_image_mlx.py) within 1e-5, also with block 22 skipped through the dit_replace patch that
SkipLayerGuidanceDiTSimple installs. The official (diffusers folder) layout with separate q/k/v loads to the same
network; files that are not MOSS-Image are refused by name."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from cluster.refs import ModelRef, file_digest
from nodes.library.slg import skips
from nodes.modelfns.network_patches import dit_replaced
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.loader import load_diffusion_model, load_vae
from nodes.models.moss_image import comfy_layout
from nodes.models.moss_image_demo import CONFIG, build_demo_moss_image
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "moss_image_mlx.json").read_text())


def ref_for(path: str) -> ModelRef:
    return ModelRef("diffusion_model", "moss_image", (path,), (file_digest(path),))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    torch.set_num_threads(1)
    (path,) = build_demo_moss_image(tmp_path_factory.mktemp("models"))
    return str(path)


def test_the_tiny_file_is_detected_as_moss_image_in_comfyuis_layout(tiny):
    info = probe(tiny)
    assert (info.arch, info.kind) == ("moss_image", "diffusion_model")
    keys = load_file(tiny).keys()
    assert "layers.22.proj.qkv.weight" in keys and "layers.0.proj.q.weight" not in keys


def test_one_evaluation_equals_the_reference_implementation(tiny):
    assert hashlib.sha256(Path(tiny).read_bytes()).hexdigest() == FIXTURE["weights_sha256"]
    model = load_diffusion_model(ref_for(tiny))
    assert model.config == CONFIG
    assert model.sampling == {"kind": "flow", "shift": 5.0, "multiplier": 1000}
    for case in FIXTURE["cases"]:
        x, context = tensor(case["x"]), tensor(case["context"])
        t = torch.tensor([case["timestep"]])
        entries = skips((), tuple(case["skip_layers"]))
        with torch.no_grad(), dit_replaced(model.module, entries, {}):
            out = model.apply(x, t, {"context": context})
        want = tensor(case["velocity"])
        assert out.shape == want.shape
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5, msg=case["name"])


def test_a_skipped_block_changes_the_prediction(tiny):
    """The skip case is not vacuous: without the patch the network's output differs from the skipped one."""
    model = load_diffusion_model(ref_for(tiny))
    case = FIXTURE["cases"][1]
    with torch.no_grad():
        plain = model.apply(tensor(case["x"]), torch.tensor([case["timestep"]]), {"context": tensor(case["context"])})
    assert (plain - tensor(case["velocity"])).abs().max() > 1e-3


def test_the_official_layout_with_separate_qkv_loads_the_same_network(tiny, tmp_path):
    sd = load_file(tiny)
    official = {}
    for k, v in sd.items():
        if k.endswith(".proj.qkv.weight"):
            for name, part in zip("qkv", v.chunk(3, 0)):
                official["model.diffusion_model." + k.replace(".qkv.", f".{name}.")] = part.contiguous()
        else:
            official["model.diffusion_model." + k] = v
    official["model.diffusion_model.rope.bands"] = torch.ones(2)  # a derived constant some files carry
    path = tmp_path / "moss_official.safetensors"
    save_file(official, str(path))
    assert probe(str(path)).arch == "moss_image"
    a, b = comfy_layout(sd), load_diffusion_model(ref_for(str(path))).module.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k].float(), b[k]) for k in a)


def test_a_context_of_the_wrong_width_is_refused_by_name(tiny):
    model = load_diffusion_model(ref_for(tiny))
    with pytest.raises(ValueError, match="CLIPLoader of type moss_image"):
        model.apply(torch.zeros(1, 128, 2, 2), torch.tensor([500.0]), {"context": torch.zeros(1, 3, 24)})


def test_a_file_without_the_image_head_is_not_moss_image(tmp_path):
    path = tmp_path / "half.safetensors"
    save_file({"shared_block_modulation.weight": torch.zeros(12, 2)}, str(path))
    with pytest.raises(ModelLoadError, match="not a MOSS-Image transformer"):
        comfy_layout(load_file(str(path)), str(path))


def test_a_small_decoder_flux2_vae_loads_and_decodes_as_diffusers(tmp_path):
    """The MOSS templates' flux2-vae_small: FLUX.2's encoder with a narrower decoder (widths read from the up
    blocks); it decodes as diffusers' AutoencoderKLFlux2 built with those decoder widths."""
    from diffusers import AutoencoderKLFlux2

    torch.manual_seed(0)
    vae = AutoencoderKLFlux2(
        block_out_channels=(64, 64, 64, 64),
        decoder_block_out_channels=(32, 32, 32, 64),
        layers_per_block=1,
        latent_channels=32,
        norm_num_groups=32,
    ).eval()
    with torch.no_grad():
        vae.bn.running_mean.normal_()
        vae.bn.running_var.uniform_(0.5, 2.0)
    path = tmp_path / "flux2-vae_small_tiny.safetensors"
    save_file({k: v.contiguous() for k, v in vae.state_dict().items()}, str(path))
    loaded = load_vae(ModelRef("vae", "flux2", (str(path),), (file_digest(str(path)),)))
    latent = torch.randn(1, 128, 2, 3)
    with torch.no_grad():
        ours = loaded.module.decode(latent.reshape(1, 32, 2, 2, 2, 3).permute(0, 1, 4, 2, 5, 3).reshape(1, 32, 4, 6))
        want = vae.decode(latent.reshape(1, 32, 2, 2, 2, 3).permute(0, 1, 4, 2, 5, 3).reshape(1, 32, 4, 6))
    torch.testing.assert_close(ours.sample, want.sample, rtol=0, atol=0)
    assert loaded.module.config.decoder_block_out_channels == (32, 32, 32, 64)


def test_an_int8_convrot_file_as_the_templates_download_loads(tiny, tmp_path):
    """The templates' moss_image_*_int8_convrot: the joint blocks' linear layers as ComfyUI's int8 tensorwise
    ConvRot layers (comfy-kitchen's quantizer, groups of 16 for the tiny widths), under model.diffusion_model.;
    they load dequantized, and the prediction stays within int8 rounding of the bf16 file's."""
    pytest.importorskip("comfy_kitchen")
    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout

    config = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 16}
    raw = torch.tensor(list(json.dumps(config).encode()), dtype=torch.uint8)
    sd, quantized = {}, 0
    for k, v in load_file(tiny).items():
        name = "model.diffusion_model." + k
        if k.startswith("layers.") and ".proj." in k:
            q, params = TensorWiseINT8Layout.quantize(
                v.float(), is_weight=True, per_channel=True, convrot=True, convrot_groupsize=16
            )
            base = name[: -len("weight")]
            sd |= {name: q, base + "weight_scale": params.scale, base + "comfy_quant": raw.clone()}
            quantized += 1
        else:
            sd[name] = v
    path = tmp_path / "moss_image_tiny_int8_convrot.safetensors"
    save_file(sd, str(path))
    assert quantized == 4 * CONFIG["num_layers"] and probe(str(path)).arch == "moss_image"
    case = FIXTURE["cases"][0]
    args = (tensor(case["x"]), torch.tensor([case["timestep"]]), {"context": tensor(case["context"])})
    with torch.no_grad():
        int8 = load_diffusion_model(ref_for(str(path))).apply(*args)
        full = load_diffusion_model(ref_for(tiny)).apply(*args)
    assert not torch.equal(int8, full) and (int8 - full).abs().max() < 0.05 * full.abs().max()
