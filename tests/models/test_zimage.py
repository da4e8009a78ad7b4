"""Z-Image (Turbo): files in ComfyUI's real key layout are detected by their shapes, sized from them, and load
into diffusers' ZImageTransformer2DModel; the loaded model answers as diffusers' own model on the same weights
does under ComfyUI's conventions (time 1 - sigma, negated output, circular padding of odd sizes)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from cluster.refs import ModelRef
from nodes.models.detect import classify, probe
from nodes.models.errors import ModelLoadError
from nodes.models.flux_demo import randomize_constants
from nodes.models.zimage import infer_config, load_diffusion_model, make_transformer, to_diffusers_layout
from nodes.models.zimage_demo import TINY_CONFIG, TINY_WIDTHS, diffusers_to_comfy, tiny_zimage_state_dicts

# ComfyUI's NextDiT (comfy/ldm/lumina/model.py) parameter names, per block and at the top.
BLOCK = [
    "attention.qkv.weight",
    "attention.out.weight",
    "attention.q_norm.weight",
    "attention.k_norm.weight",
    "feed_forward.w1.weight",
    "feed_forward.w2.weight",
    "feed_forward.w3.weight",
    "attention_norm1.weight",
    "attention_norm2.weight",
    "ffn_norm1.weight",
    "ffn_norm2.weight",
]
MODULATION = ["adaLN_modulation.0.weight", "adaLN_modulation.0.bias"]
TOP = [
    "x_embedder.weight",
    "x_embedder.bias",
    "t_embedder.mlp.0.weight",
    "t_embedder.mlp.0.bias",
    "t_embedder.mlp.2.weight",
    "t_embedder.mlp.2.bias",
    "cap_embedder.0.weight",
    "cap_embedder.1.weight",
    "cap_embedder.1.bias",
    "final_layer.linear.weight",
    "final_layer.linear.bias",
    "final_layer.adaLN_modulation.1.weight",
    "final_layer.adaLN_modulation.1.bias",
    "x_pad_token",
    "cap_pad_token",
]


def comfy_keys(layers: int, refiners: int) -> set[str]:
    keys = set(TOP)
    for i in range(layers):
        keys |= {f"layers.{i}.{k}" for k in BLOCK + MODULATION}
    for i in range(refiners):
        keys |= {f"noise_refiner.{i}.{k}" for k in BLOCK + MODULATION}
        keys |= {f"context_refiner.{i}.{k}" for k in BLOCK}
    return keys


def real_turbo_shapes() -> dict[str, tuple[int, ...]]:
    """z_image_turbo_bf16.safetensors's shapes: width 3840, 30 layers, 2+2 refiners, 30 heads of 128,
    Qwen3-4B's 2560-wide context, feed-forward 10240, timestep MLP 1024 -> 256."""
    dim, ffn, hd = 3840, 10240, 128
    block = {
        "attention.qkv.weight": (3 * dim, dim),
        "attention.out.weight": (dim, dim),
        "attention.q_norm.weight": (hd,),
        "attention.k_norm.weight": (hd,),
        "feed_forward.w1.weight": (ffn, dim),
        "feed_forward.w2.weight": (dim, ffn),
        "feed_forward.w3.weight": (ffn, dim),
        "attention_norm1.weight": (dim,),
        "attention_norm2.weight": (dim,),
        "ffn_norm1.weight": (dim,),
        "ffn_norm2.weight": (dim,),
    }
    mod = {"adaLN_modulation.0.weight": (4 * dim, 256), "adaLN_modulation.0.bias": (4 * dim,)}
    shapes = {
        "x_embedder.weight": (dim, 64),
        "x_embedder.bias": (dim,),
        "t_embedder.mlp.0.weight": (1024, 256),
        "t_embedder.mlp.0.bias": (1024,),
        "t_embedder.mlp.2.weight": (256, 1024),
        "t_embedder.mlp.2.bias": (256,),
        "cap_embedder.0.weight": (2560,),
        "cap_embedder.1.weight": (dim, 2560),
        "cap_embedder.1.bias": (dim,),
        "final_layer.linear.weight": (64, dim),
        "final_layer.linear.bias": (64,),
        "final_layer.adaLN_modulation.1.weight": (dim, 256),
        "final_layer.adaLN_modulation.1.bias": (dim,),
        "x_pad_token": (1, dim),
        "cap_pad_token": (1, dim),
    }
    for name, n, blk in (
        ("layers", 30, {**block, **mod}),
        ("noise_refiner", 2, {**block, **mod}),
        ("context_refiner", 2, block),
    ):
        shapes |= {f"{name}.{i}.{k}": s for i in range(n) for k, s in blk.items()}
    return shapes


def test_real_turbo_file_is_detected_and_sized_from_its_shapes():
    shapes = real_turbo_shapes()
    assert set(shapes) == comfy_keys(30, 2)
    prefixed = {"model.diffusion_model." + k: s for k, s in shapes.items()}
    for layout in (shapes, prefixed):
        info = classify(layout, "z_image_turbo_bf16.safetensors")
        assert (info.arch, info.kind) == ("zimage", "diffusion_model")
    sd = to_diffusers_layout({k: torch.empty(s, device="meta") for k, s in prefixed.items()})
    config, widths = infer_config(sd)
    assert {
        k: config[k]
        for k in (
            "dim",
            "n_layers",
            "n_refiner_layers",
            "n_heads",
            "n_kv_heads",
            "cap_feat_dim",
            "in_channels",
            "axes_dims",
        )
    } == {
        "dim": 3840,
        "n_layers": 30,
        "n_refiner_layers": 2,
        "n_heads": 30,
        "n_kv_heads": 30,
        "cap_feat_dim": 2560,
        "in_channels": 16,
        "axes_dims": [32, 48, 48],
    }
    assert widths == {"t_mid": 1024, "ffn": 10240}
    with torch.device("meta"):
        built = make_transformer(config, widths).state_dict()
    assert {k: tuple(v.shape) for k, v in built.items()} == {k: tuple(v.shape) for k, v in sd.items()}


def test_lumina2_is_not_taken_for_zimage():
    """Lumina 2 has the same embedder names but SiLU before its modulation Linear (adaLN_modulation.1): it is
    Lumina 2's (nodes/models/lumina2.py), never Z-Image's."""
    shapes = {k.replace("adaLN_modulation.0", "adaLN_modulation.1"): s for k, s in real_turbo_shapes().items()}
    assert classify(shapes, "lumina_2.safetensors").arch == "lumina2"


def test_demo_file_has_comfyuis_names_and_loads_with_its_widths(tmp_path):
    sd = tiny_zimage_state_dicts()["transformer"]
    assert set(sd) == comfy_keys(TINY_CONFIG["n_layers"], TINY_CONFIG["n_refiner_layers"])
    path = tmp_path / "z-image-turbo-tiny.safetensors"
    save_file(sd, str(path))
    assert probe(path).arch == "zimage"
    model = load_diffusion_model(ModelRef("diffusion_model", "zimage", (str(path),), ("",)), sd)
    assert {k: model.config[k] for k in TINY_WIDTHS} == TINY_WIDTHS  # ComfyUI's widths, not diffusers' rule
    back = diffusers_to_comfy(model.module.state_dict())
    assert set(back) == set(sd) and all(torch.equal(back[k], sd[k]) for k in sd)


def diffusers_native(seed: int = 3):
    """A diffusers-built ZImageTransformer2DModel (diffusers' own widths), every weight distinct."""
    from diffusers import ZImageTransformer2DModel

    torch.manual_seed(seed)
    cfg = {k: v for k, v in TINY_CONFIG.items()} | {"n_refiner_layers": 2}
    model = ZImageTransformer2DModel(**cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.x_pad_token.normal_(generator=gen)
        model.cap_pad_token.normal_(generator=gen)
    randomize_constants(model, gen)
    return model


@pytest.mark.parametrize("size", [(8, 8), (9, 11)])
def test_loaded_model_answers_as_diffusers_does_under_comfyuis_conventions(tmp_path, size):
    """ComfyUI's NextDiT for Z-Image: t = 1 - sigma into the network, output negated, odd latents padded
    circularly to whole 2x2 patches and cropped back (diffusers' pipeline: the same time and sign)."""
    oracle = diffusers_native()
    sd = {"model.diffusion_model." + k: v for k, v in diffusers_to_comfy(oracle.state_dict()).items()}
    path = tmp_path / "z.safetensors"
    save_file(sd, str(path))
    model = load_diffusion_model(ModelRef("diffusion_model", "zimage", (str(path),), ("",)), sd)
    gen = torch.Generator().manual_seed(0)
    h, w = size
    x = torch.randn(2, 16, h, w, generator=gen)
    context = torch.randn(2, 37, TINY_CONFIG["cap_feat_dim"], generator=gen)  # 37 tokens: padded to 64
    sigma = torch.tensor([0.8, 0.3])
    ours = model.apply(x, sigma, {"context": context})
    padded = torch.nn.functional.pad(x, (0, w % 2, 0, h % 2), mode="circular")
    with torch.no_grad():
        ref = oracle(x=[xi.unsqueeze(1) for xi in padded], t=1 - sigma, cap_feats=list(context), return_dict=False)[0]
    expected = -torch.stack([r[:, 0] for r in ref])[:, :, :h, :w]
    assert ours.shape == (2, 16, h, w)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)


def test_a_truncated_file_is_refused(tmp_path):
    sd = tiny_zimage_state_dicts()["transformer"]
    del sd["layers.1.feed_forward.w2.weight"]
    with pytest.raises(ModelLoadError, match="w2"):
        load_diffusion_model(ModelRef("diffusion_model", "zimage", (str(tmp_path / "z.safetensors"),), ("",)), sd)


def test_all_in_one_checkpoint_gives_all_three_components(demo_workspace, tmp_path):
    """ComfyUI's checkpoint layout for Z-Image: model.diffusion_model. + text_encoders.qwen3_4b.transformer. +
    vae. (supported_models.ZImage); CheckpointLoaderSimple's three outputs load from it."""
    from nodes.models.loader import load_text_encoder, load_vae

    parts = tiny_zimage_state_dicts()
    prefixes = {
        "transformer": "model.diffusion_model.",
        "text_encoder": "text_encoders.qwen3_4b.transformer.",
        "vae": "vae.",
    }
    path = tmp_path / "z_image_turbo_aio.safetensors"
    save_file({prefixes[p] + k: v for p, sd in parts.items() for k, v in sd.items()}, str(path))
    info = probe(path)
    assert (info.arch, info.kind, info.components) == (
        "zimage",
        "checkpoint",
        frozenset({"diffusion_model", "text_encoder", "vae"}),
    )
    ref = ModelRef("diffusion_model", "zimage", (str(path),), ("",))
    from nodes.models.loader import load_diffusion_model as load_any

    assert load_any(ref).config["dim"] == TINY_CONFIG["dim"]
    te = load_text_encoder(ModelRef("text_encoder", "zimage", (str(path),), ("",)))
    cond, _ = te.encode(te.tokenize("a cat"))
    assert cond.shape[-1] == TINY_CONFIG["cap_feat_dim"]
    vae = load_vae(ModelRef("vae", "zimage", (str(path),), ("",)))
    assert vae.latent_channels == 16


def test_a_batched_step_gives_each_samples_unbatched_bits(fixed_threads):
    """cluster.scheduling.batching merges steps of different requests: each sample's output must not depend on the batch."""
    sd = tiny_zimage_state_dicts()["transformer"]
    model = load_diffusion_model(ModelRef("diffusion_model", "zimage", ("z.safetensors",), ("",)), sd)
    gen = torch.Generator().manual_seed(1)
    for h, w in ((16, 16), (32, 24)):
        x = torch.randn(3, 16, h, w, generator=gen)
        context = torch.randn(3, 45, TINY_CONFIG["cap_feat_dim"], generator=gen)
        sigma = torch.tensor([0.6])
        batched = model.apply(x, sigma, {"context": context})
        alone = torch.cat([model.apply(x[i : i + 1], sigma, {"context": context[i : i + 1]}) for i in range(3)])
        assert torch.equal(batched, alone)
