"""Patches inside the network against ComfyUI 0.3.64 (a125cd84): the fixture
tests/nodes/fixtures/comfyui_model_patches.json.xz holds what ComfyUI's own node code computed on fixed tensors
(scripts/record_comfyui_model_patches.py, run in ComfyUI's environment): the FreeU / FreeU_V2 output-block
patches, PatchModelAddDownscale's input and output patches, PAG's post-CFG function with a toy
calc_cond_batch, and ComfyUI's ldm UNet on the demo SD1 weights with each node's patches installed, which
our diffusers UNet with the same patches as hooks must reproduce."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library import tomesd
from nodes.library.attention_multiply import (
    CLIPAttentionMultiply,
    UNetCrossAttentionMultiply,
    UNetSelfAttentionMultiply,
    UNetTemporalAttentionMultiply,
)
from nodes.library.easycache import SKIPPED, LazyCache
from nodes.library.freelunch import FreeU, FreeU_V2, FreeUPatch
from nodes.library.hypernetwork import HypernetworkLoader, HypernetworkPatch
from nodes.library.hypertile import HyperTile, HyperTileIn, HyperTileOut
from nodes.library.model_downscale import PatchModelAddDownscale
from nodes.library.pag import IdentityAttention, PerturbedAttentionGuidance
from nodes.library.sag import SCORES, RecordingAttention, SelfAttentionGuidance
from nodes.library.slg import SkipBlock, SkipLayerGuidanceDiT, SkipLayerGuidanceDiTSimple
from nodes.library.tomesd import TomeMerge, TomePatchModel, TomeUnmerge
from nodes.loaders import make_ref
from nodes.modelfns.model_options import NETWORK, sampler_patches, weights_ref
from nodes.modelfns.network_patches import CALC_COND, apply_model, with_network_patch
from nodes.models.merge import merges
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_model_patches.json.xz")
NODES = {
    "FreeU": FreeU,
    "FreeU_V2": FreeU_V2,
    "PatchModelAddDownscale": PatchModelAddDownscale,
    "PerturbedAttentionGuidance": PerturbedAttentionGuidance,
    "HyperTile": HyperTile,
    "TomePatchModel": TomePatchModel,
    "SelfAttentionGuidance": SelfAttentionGuidance,
}


def sd1_ref(workspace) -> ModelRef:
    return make_ref("diffusion_model", "sd1", [workspace.root / "models" / "checkpoints" / "sd1-tiny.safetensors"])


@pytest.fixture(scope="module")
def sd1(demo_workspace) -> ModelRef:
    return sd1_ref(demo_workspace)


def entries(model: ModelRef) -> tuple:
    return tuple(model.option(NETWORK, ()))


@pytest.mark.parametrize("case", FIXTURE["freeu"], ids=lambda c: f"{c['node']}-{c['h']['shape'][1]}ch")
def test_freeu_output_block_patch_matches_comfyui(case):
    fn = FreeUPatch(*case["params"], v2=case["node"] == "FreeU_V2")
    h, hsp = fn(tensor(case["h"]), tensor(case["hsp"]), {"model_channels": case["model_channels"]})
    assert torch.allclose(h, tensor(case["out_h"]), atol=1e-6, rtol=1e-6)
    assert torch.allclose(hsp, tensor(case["out_hsp"]), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "case",
    FIXTURE["downscale"],
    ids=lambda c: f"{c['params']['downscale_method']}-{c['params']['downscale_after_skip']}",
)
def test_deep_shrink_patches_match_comfyui(sd1, case):
    model = PatchModelAddDownscale().patch(sd1, **case["params"])[0]
    (hook, _, down), (out_hook, _, up) = entries(model)
    assert hook == ("input_block_patch_after_skip" if case["params"]["downscale_after_skip"] else "input_block_patch")
    assert out_hook == "output_block_patch"
    assert (down.sigma_start, down.sigma_end) == pytest.approx((case["sigma_start"], case["sigma_end"]), rel=1e-6)
    for r in case["input"]:
        out = down(tensor(case["h"]), {"block": ("input", r["block"]), "sigmas": torch.tensor([r["sigma"]] * 2)})
        assert torch.allclose(out, tensor(r["out"]), atol=1e-5), (r["block"], r["sigma"])
    h, hsp = up(tensor(case["small"]), tensor(case["skip"]), {})
    assert torch.allclose(h, tensor(case["out_h"]), atol=1e-5)
    assert torch.equal(hsp, tensor(case["out_hsp"]))


@pytest.mark.parametrize("case", FIXTURE["pag"], ids=lambda c: f"scale{c['scale']}")
def test_pag_post_cfg_matches_comfyui(sd1, case):
    model = PerturbedAttentionGuidance().patch(sd1, case["scale"])[0]
    fn = sampler_patches(model)["sampler_post_cfg_function"][0]
    calls = []

    def calc(model, conds, x, sigma, options):  # the same toy evaluator as the recording
        replaced = [e for e in options[NETWORK] if e[0] == "attn1_replace"]
        calls.append({"attn1": [str(e[1]) for e in replaced]})
        assert all(isinstance(e[2], IdentityAttention) for e in replaced)
        return [x * 0.5 + 0.25 * len(replaced)]

    out = fn(
        {
            "model": None,
            "cond_denoised": tensor(case["cond_denoised"]),
            "cond": [{}],
            "denoised": tensor(case["denoised"]),
            "sigma": torch.tensor([3.0]),
            "input": tensor(case["x"]),
            "model_options": {CALC_COND: calc},
        }
    )
    assert torch.allclose(out, tensor(case["result"]), atol=1e-6)
    assert calls == case["calc_options"]
    assert tuple(case["replace_key"]) == ("middle", 0) and case["replace_matches_v"]
    q, k, v = (torch.randn(1, 3, 8) for _ in range(3))
    assert IdentityAttention()(q, k, v, {}) is v


def tiny_hypernetwork(activation: str, layer_norm: bool, seed: int) -> dict:
    """The hypernetwork scripts/record_comfyui_model_patches.py builds (A1111's format, the demo SD1 widths)."""
    from collections import OrderedDict

    gen = torch.Generator().manual_seed(seed)

    def mlp(width: int) -> OrderedDict:
        sd, index = OrderedDict(), 0
        for a, b in ((width, width * 2), (width * 2, width)):
            sd[f"linear.{index}.weight"] = torch.randn(b, a, generator=gen) * 0.1
            sd[f"linear.{index}.bias"] = torch.randn(b, generator=gen) * 0.1
            index += 1
            if layer_norm:
                sd[f"linear.{index}.weight"] = 1 + torch.randn(b, generator=gen) * 0.1
                sd[f"linear.{index}.bias"] = torch.randn(b, generator=gen) * 0.1
                index += 1
        return sd

    return {
        32: [mlp(32), mlp(32)],
        64: [mlp(64), mlp(64)],
        "activation_func": activation,
        "is_layer_norm": layer_norm,
        "use_dropout": False,
        "activate_output": False,
        "last_layer_dropout": False,
    }


def write_hypernetwork(path: Path, activation: str, layer_norm: bool, seed: int) -> HypernetworkPatch:
    torch.save(tiny_hypernetwork(activation, layer_norm, seed), path)
    from cluster.refs import file_digest

    return HypernetworkPatch(str(path), file_digest(path), 0.7)


@pytest.fixture(scope="module")
def unet_hypernetwork(tmp_path_factory) -> HypernetworkPatch:
    path = tmp_path_factory.mktemp("hypernetworks") / "unet.pt"
    patch = write_hypernetwork(path, *FIXTURE["hypernetwork"]["unet_file"])
    return HypernetworkPatch(patch.path, patch.digest, FIXTURE["unet"]["cases"][-1]["params"]["strength"])


def _patched(sd1: ModelRef, case: dict, hypernetwork: HypernetworkPatch | None = None) -> ModelRef:
    if case["node"] is None:
        return sd1
    if case["node"] == "HypernetworkLoader":
        return with_network_patch(with_network_patch(sd1, "attn1_patch", hypernetwork), "attn2_patch", hypernetwork)
    if case["node"] == "PerturbedAttentionGuidance":  # its second model call: the replacement alone
        return with_network_patch(sd1, "attn1_replace", IdentityAttention(), ("middle", 0))
    return NODES[case["node"]]().patch(sd1, **case["params"])[0]


@pytest.fixture(scope="module")
def sd1_unet(sd1, demo_workspace):
    from nodes.models.loader import load_diffusion_model

    path = demo_workspace.root / "models" / "checkpoints" / "sd1-tiny.safetensors"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == FIXTURE["unet"]["checkpoint_sha256"], (
        "the demo checkpoint changed: re-record the fixture"
    )
    return load_diffusion_model(sd1)


@pytest.mark.parametrize("case", FIXTURE["unet"]["cases"], ids=lambda c: c["case"])
def test_patched_unet_matches_comfyuis_ldm_unet(sd1, sd1_unet, case, monkeypatch, unet_hypernetwork):
    # ComfyUI's ToMe draws from torch's global generator, seeded before the forward pass: one generator
    # shared by the layers in order gives the same draws.
    shared = torch.Generator().manual_seed(FIXTURE["unet"]["global_seed"])
    monkeypatch.setattr(tomesd, "step_generator", lambda options, tokens: shared)
    model = _patched(sd1, case, unet_hypernetwork)
    assert weights_ref(model) == sd1  # the weights (and their caches) are the plain model's
    x, ctx = tensor(case["x"]), tensor(case["context"])
    with torch.no_grad():
        out = apply_model(
            sd1_unet,
            sampler_patches(model),
            x,
            torch.full((2,), case["t"]),
            {"context": ctx},
            torch.full((2,), case["sigma"]),
            [0, 1],
        )
    expected = tensor(case["out"])
    assert torch.allclose(out, expected, atol=2e-5, rtol=1e-4), float((out - expected).abs().max())


def test_hooks_are_removed_after_the_call(sd1, sd1_unet):
    module = sd1_unet.module
    processors = {name: type(p) for name, p in module.attn_processors.items()}
    model = PatchModelAddDownscale().patch(
        FreeU().patch(sd1, 1.1, 1.2, 0.9, 0.2)[0], 1, 2.0, 0.0, 1.0, True, "bicubic", "bicubic"
    )[0]
    model = with_network_patch(model, "attn1_replace", IdentityAttention(), ("middle", 0))
    x = torch.randn(1, 4, 8, 8)
    with torch.no_grad():
        apply_model(
            sd1_unet,
            sampler_patches(model),
            x,
            torch.tensor([500.0]),
            {"context": torch.randn(1, 7, 32)},
            torch.tensor([5.0]),
            [0],
        )
    assert {name: type(p) for name, p in module.attn_processors.items()} == processors
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in module.modules())


ATTENTION_NODES = {
    "UNetSelfAttentionMultiply": UNetSelfAttentionMultiply,
    "UNetCrossAttentionMultiply": UNetCrossAttentionMultiply,
    "UNetTemporalAttentionMultiply": UNetTemporalAttentionMultiply,
    "CLIPAttentionMultiply": CLIPAttentionMultiply,
}


def _our_name(comfy_key: str) -> str:
    """ComfyUI's state-dict key -> the name our merge rules see (ldm UNet key; "side/HF key" for CLIP)."""
    for prefix, ours in (("diffusion_model.", ""), ("clip_l.transformer.", "l/")):
        if comfy_key.startswith(prefix):
            return ours + comfy_key[len(prefix) :]
    raise AssertionError(comfy_key)


@pytest.mark.parametrize("case", FIXTURE["attention_multiply"]["cases"], ids=lambda c: c["node"])
def test_attention_multiply_scales_comfyuis_keys(demo_workspace, case):
    component, arch = ("text_encoder", "sd1") if case["node"] == "CLIPAttentionMultiply" else ("diffusion_model", "sd1")
    ref = make_ref(component, arch, [demo_workspace.root / "models" / "checkpoints" / "sd1-tiny.safetensors"])
    (step,) = merges(ATTENTION_NODES[case["node"]]().patch(ref, *case["factors"])[0])
    assert step.other == ref and step.after_patches == 0
    for key in case["keys"]:
        expected = 1.0
        for strength_patch, strength_model in case["patches"].get(key, []):
            assert strength_patch == 0.0
            expected *= strength_model
        strengths = step.strengths(_our_name(key))
        assert (1.0 if strengths is None else strengths[0]) == pytest.approx(expected), key
        assert strengths is None or strengths[1] == 0.0


def test_attention_multiply_scales_the_loaded_weights(sd1, sd1_unet):
    from nodes.models.loader import load_diffusion_model

    scaled_model = load_diffusion_model(UNetSelfAttentionMultiply().patch(sd1, 1.5, 1.0, 0.5, 2.0)[0])
    plain, patched = sd1_unet.module.state_dict(), scaled_model.module.state_dict()
    factors = {
        "attn1.to_q.weight": 1.5,
        "attn1.to_k.weight": 1.0,
        "attn1.to_v.weight": 0.5,
        "attn1.to_out.0.weight": 2.0,
        "attn1.to_out.0.bias": 2.0,
    }
    seen = 0
    for key, w in plain.items():
        factor = next((f for suffix, f in factors.items() if key.endswith(suffix)), 1.0)
        assert torch.equal(patched[key], w * factor) if factor != 1.0 else torch.equal(patched[key], w), key
        seen += factor != 1.0
    assert seen == 4 * sum(key.endswith("attn1.to_q.weight") for key in plain)  # four in each attention


@pytest.mark.parametrize("case", FIXTURE["hypertile"], ids=lambda c: f"{c['shape']}-{c['q']['shape'][1]}tokens")
def test_hypertile_patches_match_comfyui(case):
    p = case["params"]
    tile_in = HyperTileIn(p["tile_size"], p["swap_size"], p["max_depth"], p["scale_depth"])
    q = tensor(case["q"])
    options = {"original_shape": case["shape"], "sigmas": torch.tensor([1.0])}
    tiled, k, v = tile_in(q, q, q, options)
    assert torch.equal(tiled, tensor(case["tiled"])) and k is q and v is q
    assert torch.equal(HyperTileOut()(tiled * 2.0, options), tensor(case["back"]))


@pytest.mark.parametrize("case", FIXTURE["tome"], ids=lambda c: f"{c['shape']}-{c['q']['shape'][1]}tokens")
def test_tome_patches_match_comfyui(case, monkeypatch):
    monkeypatch.setattr(tomesd, "step_generator", lambda options, tokens: torch.Generator().manual_seed(case["seed"]))
    q = tensor(case["q"])
    options = {"original_shape": case["shape"]}
    merged, k, v = TomeMerge(case["ratio"])(q, q, q, options)
    assert torch.equal(merged, tensor(case["merged"])) and k is q and v is q
    assert torch.allclose(TomeUnmerge()(merged * 2.0 + 1.0, options), tensor(case["back"]), atol=1e-6)


def test_random_tiling_and_merging_depend_only_on_the_step():
    """Where ComfyUI draws from the global generator, a step's draws here come from its sigma and layer."""
    q = torch.randn(1, 256, 8)
    draws = []
    for _ in range(2):
        torch.manual_seed(len(draws))  # the global generator plays no part
        opts = {"original_shape": [1, 4, 16, 16], "sigmas": torch.tensor([3.5])}
        draws.append((HyperTileIn(16, 3, 0, False)(q, q, q, dict(opts))[0], TomeMerge(0.5)(q, q, q, dict(opts))[0]))
    assert all(torch.equal(a, b) for a, b in zip(*draws))


@pytest.mark.parametrize("case", FIXTURE["sag"], ids=lambda c: f"scale{c['scale']}-sigma{c['blur_sigma']}")
def test_sag_matches_comfyui(sd1, case):
    model = SelfAttentionGuidance().patch(sd1, case["scale"], case["blur_sigma"])[0]
    patches = sampler_patches(model)
    assert patches["disable_cfg1_optimization"] is True and case["disable_cfg1"]
    ((hook, key, replacement),) = patches[NETWORK]
    assert [hook.split("_")[0], *map(str, key)] == case["replace_key"]
    options = {}
    out = replacement(
        tensor(case["q"]),
        tensor(case["k"]),
        tensor(case["v"]),
        {"n_heads": 2, "cond_or_uncond": [0, 1], "model_options": options},
    )
    assert torch.allclose(out, tensor(case["attn_out"]), atol=1e-6)
    assert options[SCORES].shape[0] == 2  # the negative half's heads
    seen = []

    def calc(model, conds, x, sigma, model_options):  # the recording's toy evaluator
        seen.append(x)
        return [x * 0.5 + 0.1]

    result = patches["sampler_post_cfg_function"][0](
        {
            "model": None,
            "uncond_denoised": tensor(case["uncond_denoised"]),
            "uncond": [{}],
            "denoised": tensor(case["denoised"]),
            "sigma": torch.tensor([2.0]),
            "input": tensor(case["x"]),
            "model_options": {**options, CALC_COND: calc},
        }
    )
    assert torch.allclose(result, tensor(case["result"]), atol=1e-5)
    if case["calc_input"] is None:
        assert not seen
    else:
        assert torch.allclose(seen[0], tensor(case["calc_input"]), atol=1e-5)


def test_sag_attention_without_the_negative_prompt_records_nothing():
    q = torch.randn(1, 4, 16)
    options = {}
    out = RecordingAttention()(q, q, q, {"n_heads": 2, "cond_or_uncond": [0], "model_options": options})
    assert out.shape == q.shape and not options


def _dit_calc(calls: list):
    """The recording's toy calc_cond_batch: side i gives 0.3 x + 0.1 * (number of skipped blocks) + i."""

    def calc(model, conds, x, sigma, options):
        skipped = [e for e in options.get(NETWORK, ()) if e[0] == "dit_replace"]
        assert all(isinstance(e[2], SkipBlock) for e in skipped)
        calls.append(sorted(list(e[1]) for e in skipped))
        return [None if c is None else x * 0.3 + 0.1 * len(skipped) + i for i, c in enumerate(conds)]

    return calc


@pytest.mark.parametrize("case", FIXTURE["slg"]["post"], ids=lambda c: f"{c['double']}|{c['single']}|{c['sigma']}")
def test_skip_layer_guidance_matches_comfyui(sd1, case):
    model = SkipLayerGuidanceDiT().patch(sd1, case["double"], case["single"], 3.0, 0.01, 0.15, case["rescaling_scale"])[
        0
    ]
    if not case["patched"]:
        assert model == sd1
        return
    fn = sampler_patches(model)["sampler_post_cfg_function"][0]
    assert (fn.sigma_start, fn.sigma_end) == pytest.approx((FIXTURE["slg"]["sigma_start"], FIXTURE["slg"]["sigma_end"]))
    calls = []
    out = fn(
        {
            "model": None,
            "cond_denoised": tensor(case["cond_denoised"]),
            "cond": [{}],
            "denoised": tensor(case["denoised"]),
            "sigma": torch.tensor([case["sigma"]]),
            "input": tensor(case["x"]),
            "model_options": {CALC_COND: _dit_calc(calls)},
        }
    )
    assert calls == case["calls"]
    assert torch.allclose(out, tensor(case["result"]), atol=1e-6)


@pytest.mark.parametrize(
    "case", FIXTURE["slg"]["simple"], ids=lambda c: f"{c['double']}|{c['single']}|{c['sigma']}|{c['with_uncond']}"
)
def test_skip_layer_guidance_simple_matches_comfyui(sd1, case):
    model = SkipLayerGuidanceDiTSimple().patch(sd1, case["double"], case["single"], 0.0, 0.5)[0]
    if not case["patched"]:
        assert model == sd1
        return
    fn = sampler_patches(model)["sampler_pre_cfg_function"][0]
    x = tensor(case["x"])
    conds = [[{}], [{}] if case["with_uncond"] else None]
    plain = _dit_calc([])(None, conds, x, None, {})  # what the step's own batch predicted
    calls = []
    outs = fn(
        {
            "conds_out": plain,
            "conds": conds,
            "input": x,
            "sigma": torch.tensor([case["sigma"]]),
            "model": None,
            "model_options": {CALC_COND: _dit_calc(calls)},
        }
    )
    # ComfyUI's function also evaluates the positive side plainly; ours keeps the step's plain prediction.
    assert calls == [c for c in case["calls"] if c]
    for ours, theirs in zip(outs, case["outs"]):
        assert (ours is None) == (theirs is None)
        assert ours is None or torch.allclose(ours, tensor(theirs), atol=1e-6)


def test_dit_block_skip_is_the_model_without_the_block(demo_workspace):
    from nodes.models.loader import load_diffusion_model

    flux = load_diffusion_model(
        make_ref(
            "diffusion_model", "flux", [demo_workspace.root / "models" / "diffusion_models" / "flux-tiny.safetensors"]
        )
    )
    module = flux.module
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(1, 16, 8, 8, generator=gen)
    cond = {
        "context": torch.randn(1, 5, module.config.joint_attention_dim, generator=gen),
        "pooled": torch.randn(1, module.config.pooled_projection_dim, generator=gen),
        "guidance": 3.5,
    }
    t, sigma = torch.tensor([0.5]), torch.tensor([0.5])
    skips = (
        (("dit_replace", ("single_block", 1), SkipBlock()),),
        (("dit_replace", ("double_block", 0), SkipBlock()), ("dit_replace", ("double_block", 9), SkipBlock())),
    )
    with torch.no_grad():
        plain = flux.apply(x, t, cond)
        for entries, (blocks, index) in zip(
            skips, ((module.single_transformer_blocks, 1), (module.transformer_blocks, 0))
        ):
            patched = apply_model(flux, {NETWORK: entries}, x, t, cond, sigma, [0])
            original = blocks[index]
            blocks[index] = _PassThrough()
            try:
                expected = flux.apply(x, t, cond)
            finally:
                blocks[index] = original
            assert torch.equal(patched, expected) and not torch.equal(patched, plain)
    assert torch.equal(flux.apply(x, t, cond), plain)  # the swap is undone


class _PassThrough(torch.nn.Module):
    def forward(self, hidden_states, encoder_hidden_states, **kwargs):
        return encoder_hidden_states, hidden_states


@pytest.mark.parametrize(
    "case", FIXTURE["hypernetwork"]["cases"], ids=lambda c: f"{c['activation']}-{c['layer_norm']}-{c['k']['shape'][-1]}"
)
def test_hypernetwork_patch_matches_comfyui(tmp_path, case):
    patch = write_hypernetwork(tmp_path / "h.pt", case["activation"], case["layer_norm"], case["seed"])
    q, k, v = (tensor(case[n]) for n in ("q", "k", "v"))
    with torch.no_grad():
        oq, ok, ov = patch(q, k, v, {})
    assert oq is q
    assert torch.allclose(ok, tensor(case["out_k"]), atol=1e-6) and torch.allclose(ov, tensor(case["out_v"]), atol=1e-6)


def test_hypernetwork_loader_patches_both_attentions(demo_workspace, sd1):
    folder = demo_workspace.root / "models" / "hypernetworks"
    folder.mkdir(parents=True, exist_ok=True)
    relu, gelu = folder / "test-relu.pt", folder / "test-gelu.pt"
    try:
        write_hypernetwork(relu, "relu", True, 0)
        torch.save({**tiny_hypernetwork("relu", True, 0), "activation_func": "gelu"}, gelu)
        (model,) = HypernetworkLoader().load_hypernetwork(sd1, "test-relu.pt", 0.5)
        hooks = [(hook, fn.strength) for hook, _, fn in entries(model)]
        assert hooks == [("attn1_patch", 0.5), ("attn2_patch", 0.5)] and weights_ref(model) == sd1
        # An activation ComfyUI does not know: logged, the model is returned unpatched (as ComfyUI does).
        assert HypernetworkLoader().load_hypernetwork(sd1, "test-gelu.pt", 1.0) == (sd1,)
        with pytest.raises(FileNotFoundError):
            HypernetworkLoader().load_hypernetwork(sd1, "missing.pt", 1.0)
    finally:
        relu.unlink(missing_ok=True)
        gelu.unlink(missing_ok=True)


@pytest.mark.parametrize("case", FIXTURE["lazycache"], ids=lambda c: f"threshold{c['reuse_threshold']}")
def test_lazycache_matches_comfyui(sd1, case):
    model = LazyCache().patch(sd1, case["reuse_threshold"], case["start_percent"], case["end_percent"], False)[0]
    wrapper = sampler_patches(model)["predict_noise_wrapper"]
    assert weights_ref(model) == sd1
    sigmas, x, state, calls = case["sigmas"], tensor(case["x0"]), {}, []
    for i in range(len(sigmas) - 1):

        def predict(x_, sigma_):
            calls.append(i)
            return x_ * 0.8 + 0.05 * sigma_.reshape(-1, 1, 1, 1)

        state = {k: v.clone() for k, v in state.items()}  # as it travels between steps
        out = wrapper(predict, x, torch.tensor([sigmas[i]]), state)
        assert torch.allclose(out, tensor(case["outs"][i]), atol=1e-5), i
        x = out + (x - out) * (sigmas[i + 1] / sigmas[i])
    assert calls == case["model_calls"]
    assert int(state.get(SKIPPED, torch.tensor(0))) == case["skipped"]
