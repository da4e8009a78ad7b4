"""SeedVR2's transformer (nodes/models/seedvr2_dit.py), built from the tiny demo files in the published layouts
(3B, 7B shared-weights SwiGLU, 7B separate-weights GELU), computes what today's ComfyUI's own NaDiT computes on the
same weights and inputs, within 1e-5 (tests/models/fixtures/comfyui_seedvr2_dit.json.xz, recorded by
scripts/record_comfyui_seedvr2_dit.py from comfy/ldm/seedvr/model.py): one window, and latents large enough for
3 x 2 x 2 windows and the same grid shifted by half a window, at several timesteps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nodes.models.seedvr2_demo import TRANSFORMER_FILES, build_demo_seedvr2_transformers, tiny_dit_state_dict
from nodes.models.seedvr2_dit import load_seedvr2_dit, spec_from_state_dict, window_slices
from tests.recorded_tensors import at_recorded, load_json, tensor

RECORDED = load_json(Path(__file__).parent / "fixtures" / "comfyui_seedvr2_dit.json.xz")


@pytest.fixture(scope="module")
def state_dicts(tmp_path_factory):
    from scripts.comfyui_recording import sha256

    paths = build_demo_seedvr2_transformers(tmp_path_factory.mktemp("seedvr2_dit"))
    files = {}
    for variant, path in zip(TRANSFORMER_FILES, paths, strict=True):
        assert path.as_posix().endswith(TRANSFORMER_FILES[variant])
        assert sha256(str(path)) == RECORDED["files"][variant]["sha256"], "the demo file is not the recorded one"
        files[variant] = load_file(path)
    files["7b_separate"] = tiny_dit_state_dict("7b_separate")
    total = float(sum(v.double().sum() for v in files["7b_separate"].values()))
    assert total == pytest.approx(RECORDED["separate_sum"], rel=1e-12)
    return files


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_layouts_are_told_apart(state_dicts):
    specs = {v: spec_from_state_dict(sd) for v, sd in state_dicts.items()}
    assert (specs["3b"].blocks, specs["3b"].is_7b, specs["3b"].output_norm, specs["3b"].swiglu) == (
        32,
        False,
        True,
        True,
    )
    assert (specs["7b"].blocks, specs["7b"].is_7b, specs["7b"].output_norm) == (36, True, False)
    assert sum(specs["7b"].separate) == 10 and specs["7b"].swiglu
    assert all(specs["7b_separate"].separate) and not specs["7b_separate"].swiglu
    assert [len(sd) for sd in state_dicts.values()] == [637, 694, 1130]  # the published key counts


@pytest.mark.parametrize("case", RECORDED["cases"], ids=lambda c: f"{c['variant']}-{c['shape'][2]}x{c['shape'][3]}")
def test_forward_equals_comfyui(state_dicts, case):
    model = load_seedvr2_dit(state_dicts[case["variant"]])
    gen = torch.Generator().manual_seed(case["seed"])
    x = torch.randn(case["shape"], generator=gen)
    latent = torch.randn(case["shape"], generator=gen)
    assert float(x.double().sum() + latent.double().sum()) == pytest.approx(case["sum"], abs=1e-6)
    condition = torch.cat((latent, torch.ones_like(latent[:, :1])), dim=1)
    context = [model.positive_conditioning.float()]
    with torch.no_grad():
        out = model(x, torch.tensor([case["timestep"]]), context, condition)
    expected = tensor(case["out"])
    assert (at_recorded(out, case["out"]) - expected).abs().max() < 1e-5
    assert expected.abs().max() > 0.5  # not a vanishing output


def test_windows_and_shifted_windows_tile_the_grid():
    for grid in [(1, 4, 6), (3, 24, 20), (2, 22, 18), (31, 30, 40)]:
        for shifted in (False, True):
            covered = torch.zeros(grid, dtype=torch.int64)
            for sl in window_slices(grid, shifted):
                covered[sl] += 1
            assert bool((covered == 1).all()), (grid, shifted)
    plain, shifted = window_slices((3, 24, 20), False), window_slices((3, 24, 20), True)
    assert len(plain) == len(shifted) == 12  # 3 frames x 2 x 2: the shifted grid's edge windows are cut short
    assert (plain[0][1], plain[0][2]) == (slice(0, 22), slice(0, 19))
    assert (shifted[0][1], shifted[0][2]) == (slice(0, 11), slice(0, 9))


def test_bad_inputs_are_named(state_dicts):
    model = load_seedvr2_dit(state_dicts["3b"])
    x = torch.zeros(1, 16, 1, 4, 6)
    with pytest.raises(ValueError, match="condition"):
        model(x, torch.tensor([1000.0]), [torch.zeros(58, 5120)], torch.zeros(1, 17, 1, 4, 8))
    with pytest.raises(ValueError, match="even"):
        model(torch.zeros(1, 16, 1, 5, 6), torch.tensor([1.0]), [torch.zeros(58, 5120)], torch.zeros(1, 17, 1, 5, 6))
    wrong = dict(state_dicts["3b"])
    del wrong["blocks.31.mlp.all.proj_in_gate.weight"], wrong["blocks.31.mlp.all.proj_in.weight"]
    del wrong["blocks.31.mlp.all.proj_out.weight"]
    with pytest.raises(RuntimeError, match="proj_in_gate"):
        load_seedvr2_dit(wrong)


def test_unet_loader_path_gives_the_recorded_step(tmp_path):
    """The demo 3B file through detection and loader.load_diffusion_model (UNETLoader's path): a flow model at shift
    1 whose step at sigma 1 (timestep 1000) with SeedVR2Conditioning's conditioning is ComfyUI's forward."""
    from cluster.refs import ModelRef, file_digest
    from nodes.library.seedvr2 import SeedVR2Conditioning
    from nodes.models.detect import probe
    from nodes.models.loader import load_diffusion_model

    path = build_demo_seedvr2_transformers(tmp_path)[0]
    info = probe(str(path))
    assert (info.arch, info.kind) == ("seedvr2", "diffusion_model")
    ref = ModelRef("diffusion_model", "seedvr2", (str(path),), (file_digest(path),))
    model = load_diffusion_model(ref)
    assert model.sampling == {"kind": "flow", "shift": 1.0, "multiplier": 1000}
    assert (model.latent_format.channels, model.latent_format.scale_factor) == (16, 1.0)
    case = next(c for c in RECORDED["cases"] if c["variant"] == "3b" and c["timestep"] == 1000.0)
    gen = torch.Generator().manual_seed(case["seed"])
    x = torch.randn(case["shape"], generator=gen)
    latent = torch.randn(case["shape"], generator=gen)
    positive, negative = SeedVR2Conditioning().execute(ref, {"samples": latent})
    assert positive[0][0].shape == (1, 58, 5120) and negative[0][0].shape == (1, 64, 5120)
    condition = positive[0][1]["condition"]
    assert torch.equal(condition, torch.cat((latent, torch.ones_like(latent[:, :1])), dim=1))
    with torch.no_grad():
        out = model.apply(x, torch.tensor([1000.0]), {"context": positive[0][0], "condition": condition})
    assert (at_recorded(out, case["out"]) - tensor(case["out"])).abs().max() < 1e-5
    with pytest.raises(ValueError, match="SeedVR2Conditioning"):
        model.apply(x, torch.tensor([1000.0]), {"context": positive[0][0]})
    with pytest.raises(ValueError, match="16, T, H, W"):
        SeedVR2Conditioning().execute(ref, {"samples": latent[:, :, 0]})


def test_an_int8_convrot_file_under_comfyuis_prefix_loads_its_dequantized_weights(tmp_path, state_dicts):
    """The templates' seedvr2_*_int8_convrot layout: linear weights as comfy-kitchen's int8 ConvRot codes with a
    `comfy_quant` config beside them, under model.diffusion_model.; the loader computes on the dequantized weights
    (what ComfyUI's ops hand its NaDiT), every other tensor as stored."""
    pytest.importorskip("comfy_kitchen")
    import json as json_

    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
    from safetensors.torch import save_file

    from cluster.refs import ModelRef, file_digest
    from nodes.models import comfy_quant
    from nodes.models.detect import probe
    from nodes.models.loader import load_diffusion_model

    config = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 16}
    marker = torch.tensor(list(json_.dumps(config).encode()), dtype=torch.uint8)
    quantized, prefix = {}, "model.diffusion_model."
    for key, value in state_dicts["3b"].items():
        layer = key[: -len("weight")]
        if key.endswith(".weight") and value.ndim == 2 and value.shape[1] % 16 == 0:
            q, params = TensorWiseINT8Layout.quantize(
                value.float(), is_weight=True, per_channel=True, convrot=True, convrot_groupsize=16
            )
            quantized |= {
                prefix + key: q,
                prefix + layer + "weight_scale": params.scale,
                prefix + layer + "comfy_quant": marker.clone(),
            }
        else:
            quantized[prefix + key] = value
    path = tmp_path / "seedvr2_3b_int8_convrot.safetensors"
    save_file(quantized, str(path))
    assert (probe(str(path)).arch, probe(str(path)).kind) == ("seedvr2", "diffusion_model")
    model = load_diffusion_model(ModelRef("diffusion_model", "seedvr2", (str(path),), (file_digest(path),)))
    expected = comfy_quant.dequantize({k[len(prefix) :]: v for k, v in quantized.items()}, None, torch.float32)
    weights = model.module.state_dict()
    assert set(weights) == set(expected)
    for key, value in expected.items():
        assert torch.equal(weights[key], value.float()), key
    assert sum(k.endswith("comfy_quant") for k in quantized) == 215  # every linear layer but vid_in (132 columns)
