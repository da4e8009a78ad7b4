"""FLUX.2 (Klein) files in the layouts users download -- the transformer in BFL layout (flux-2-klein-4b), the
VAE in BFL's ae layout with its batch-norm statistics (flux2-vae) -- at tiny widths with the real key names:
detected from their headers, loaded, and computing what diffusers' own classes compute from the same weights
(the transformer read by diffusers' own single-file loader, the VAE with the Flux2 pipeline's latent steps)."""

from __future__ import annotations

import pytest
import torch
from diffusers import AutoencoderKLFlux2, Flux2KleinPipeline, Flux2Transformer2DModel
from safetensors.torch import save_file

from cluster.refs import ModelRef, file_digest
from nodes.models.components import FLUX2_LATENT
from nodes.models.detect import probe
from nodes.models.flux2 import load_diffusion_model, pad_context
from nodes.models.flux2_demo import tiny_flux2_state_dicts, tiny_transformer, tiny_vae, vae_to_bfl
from nodes.models.flux2_keys import diffusers_to_bfl
from nodes.models.flux_demo import randomize_constants
from nodes.models.loader import load_diffusion_model as load_any_diffusion_model
from nodes.models.loader import load_vae


def _ref(component: str, path) -> ModelRef:
    return ModelRef(component, "flux2", (str(path),), (file_digest(path),))


@pytest.fixture(scope="module")
def transformer() -> Flux2Transformer2DModel:
    torch.manual_seed(0)
    m = tiny_transformer()
    randomize_constants(m, torch.Generator().manual_seed(0))
    return m.eval()


@pytest.fixture(scope="module")
def klein_file(tmp_path_factory, transformer):
    path = tmp_path_factory.mktemp("flux2") / "flux-2-klein-tiny.safetensors"
    save_file(diffusers_to_bfl(transformer.state_dict()), str(path))
    return path


def test_bfl_transformer_file_is_detected_as_flux2_not_flux1(klein_file, tmp_path, transformer):
    info = probe(klein_file)
    assert (info.arch, info.kind, info.layout, info.prefix) == ("flux2", "diffusion_model", "bfl", "")
    prefixed = tmp_path / "prefixed.safetensors"
    save_file(
        {"model.diffusion_model." + k: v for k, v in diffusers_to_bfl(transformer.state_dict()).items()}, str(prefixed)
    )
    assert (probe(prefixed).arch, probe(prefixed).prefix) == ("flux2", "model.diffusion_model.")
    dif = tmp_path / "diffusers.safetensors"
    save_file(transformer.state_dict(), str(dif))
    assert (probe(dif).arch, probe(dif).layout) == ("flux2", "diffusers")


def test_loaded_transformer_has_diffusers_single_file_weights_and_inferred_config(klein_file, tmp_path, transformer):
    model = load_any_diffusion_model(_ref("diffusion_model", klein_file))
    assert model.arch == "flux2" and model.latent_format == FLUX2_LATENT
    assert model.sampling == {"kind": "flux", "shift": 2.02}
    assert {
        k: model.config[k]
        for k in (
            "num_layers",
            "num_single_layers",
            "num_attention_heads",
            "attention_head_dim",
            "joint_attention_dim",
            "guidance_embeds",
        )
    } == {
        "num_layers": 1,
        "num_single_layers": 2,
        "num_attention_heads": 1,
        "attention_head_dim": 128,
        "joint_attention_dim": 48,
        "guidance_embeds": False,
    }
    (tmp_path / "cfg" / "transformer").mkdir(parents=True)
    transformer.save_config(tmp_path / "cfg" / "transformer")
    theirs = Flux2Transformer2DModel.from_single_file(
        str(klein_file), config=str(tmp_path / "cfg"), subfolder="transformer", local_files_only=True
    )
    ours = model.module.state_dict()
    assert ours.keys() == theirs.state_dict().keys()
    assert all(torch.equal(ours[k], v) for k, v in theirs.state_dict().items())


def test_apply_equals_diffusers_called_as_the_klein_pipeline_calls_it(klein_file, transformer):
    model = load_diffusion_model(
        _ref("diffusion_model", klein_file), {k: v for k, v in diffusers_to_bfl(transformer.state_dict()).items()}
    )
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 128, 3, 5, generator=gen)
    context = torch.randn(2, 512, 48, generator=gen)
    sigma = torch.tensor([0.9, 0.4])
    out = model.apply(x, sigma, {"context": context})
    with torch.no_grad():
        ref = transformer(
            hidden_states=Flux2KleinPipeline._pack_latents(x),
            encoder_hidden_states=context,
            timestep=sigma,
            img_ids=Flux2KleinPipeline._prepare_latent_ids(x),
            txt_ids=Flux2KleinPipeline._prepare_text_ids(context),
            guidance=None,
            return_dict=False,
        )[0]
    expected = ref.transpose(1, 2).reshape(x.shape)
    assert out.shape == x.shape
    # Ours runs batch-invariant projections row by row, diffusers one GEMM: float32 rounding apart.
    assert torch.allclose(out, expected, atol=2e-5, rtol=0), (out - expected).abs().max()


def test_short_context_is_left_padded_with_zeros_to_512_tokens(klein_file, transformer):
    model = load_any_diffusion_model(_ref("diffusion_model", klein_file))
    gen = torch.Generator().manual_seed(2)
    x, short = torch.randn(1, 128, 2, 2, generator=gen), torch.randn(1, 7, 48, generator=gen)
    padded = pad_context(short)
    assert padded.shape == (1, 512, 48) and torch.equal(padded[:, -7:], short) and not padded[:, :-7].any()
    sigma = torch.tensor([0.5])
    assert torch.equal(model.apply(x, sigma, {"context": short}), model.apply(x, sigma, {"context": padded}))


@pytest.fixture(scope="module")
def vae() -> AutoencoderKLFlux2:
    torch.manual_seed(3)
    gen = torch.Generator().manual_seed(3)
    m = tiny_vae(gen)
    randomize_constants(m, gen)
    return m.eval()


@pytest.mark.parametrize("layout", ["bfl", "top_level_quant_convs", "diffusers"])
def test_vae_file_is_detected_and_matches_diffusers_with_the_pipelines_latent_steps(tmp_path, vae, layout):
    sd = vae_to_bfl(vae.state_dict())
    if layout == "top_level_quant_convs":  # ComfyUI's own name for these convs
        sd = {
            k.replace("encoder.quant_conv.", "quant_conv.").replace("decoder.post_quant_conv.", "post_quant_conv."): v
            for k, v in sd.items()
        }
    elif layout == "diffusers":
        sd = {k: v for k, v in vae.state_dict().items()}
    path = tmp_path / "flux2-vae.safetensors"
    save_file(sd, str(path))
    info = probe(path)
    assert (info.arch, info.kind) == ("flux2", "vae")
    ours = load_vae(_ref("vae", path))
    assert (ours.latent_channels, ours.downscale) == (128, 16)

    gen = torch.Generator().manual_seed(4)
    pixels = torch.rand(1, 32, 48, 3, generator=gen)
    latent = ours.encode(pixels)
    mean = vae.bn.running_mean.view(1, -1, 1, 1)
    std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + vae.config.batch_norm_eps)
    with torch.no_grad():
        raw = vae.encode(pixels.movedim(-1, 1) * 2 - 1).latent_dist.mode()
        expected = (Flux2KleinPipeline._patchify_latents(raw) - mean) / std
    assert latent.shape == (1, 128, 2, 3)
    assert torch.allclose(latent, expected, atol=1e-5, rtol=0), (latent - expected).abs().max()

    z = torch.randn(1, 128, 2, 3, generator=gen)
    image = ours.decode(z)
    with torch.no_grad():
        dec = vae.decode(Flux2KleinPipeline._unpatchify_latents(z * std + mean)).sample
    assert image.shape == (1, 32, 48, 3)
    assert torch.allclose(image, ((dec + 1) / 2).clamp(0, 1).movedim(1, -1), atol=1e-5, rtol=0)


def test_demo_files_are_deterministic():
    a, b = tiny_flux2_state_dicts(), tiny_flux2_state_dicts()
    assert all(
        a[part].keys() == b[part].keys() and all(torch.equal(a[part][k], b[part][k]) for k in a[part]) for part in a
    )


def test_real_klein_4b_sizes_are_detected_and_inferred_from_shapes_alone():
    """flux-2-klein-4b's sizes (BFL's release: hidden 3072 in 24 heads, 5 double and 20 single blocks, Qwen3-4B's
    three stacked 2560-wide states as context, no guidance embedder) on the meta device: its BFL key shapes are
    classified as FLUX.2 and give back the config they were made from."""
    from nodes.models.detect import classify
    from nodes.models.flux2 import infer_config, to_diffusers_layout

    klein_4b = dict(
        in_channels=128,
        num_layers=5,
        num_single_layers=20,
        attention_head_dim=128,
        num_attention_heads=24,
        joint_attention_dim=7680,
        mlp_ratio=3.0,
        guidance_embeds=False,
    )
    with torch.device("meta"):
        bfl = diffusers_to_bfl(Flux2Transformer2DModel(**klein_4b).state_dict())
    info = classify({k: tuple(v.shape) for k, v in bfl.items()}, "flux-2-klein-4b.safetensors")
    assert (info.arch, info.kind, info.layout) == ("flux2", "diffusion_model", "bfl")
    config = infer_config(to_diffusers_layout(bfl))
    assert {k: config[k] for k in klein_4b} == klein_4b
    assert config["out_channels"] == 128 and config["axes_dims_rope"] == (32, 32, 32, 32)


def test_a_guidance_embedder_gets_comfyuis_default_fluxguidance_value_or_none(tmp_path):
    """FLUX.2 dev-style files embed guidance: 3.5 when the conditioning has none (ComfyUI's Flux default),
    FluxGuidance's value when set, and no guidance embedding at all after FluxDisableGuidance."""
    torch.manual_seed(8)
    m = Flux2Transformer2DModel(
        in_channels=128,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=128,
        num_attention_heads=1,
        joint_attention_dim=24,
        guidance_embeds=True,
    )
    randomize_constants(m, torch.Generator().manual_seed(8))
    path = tmp_path / "flux2-guided.safetensors"
    save_file(diffusers_to_bfl(m.state_dict()), str(path))
    model = load_any_diffusion_model(_ref("diffusion_model", path))
    assert model.config["guidance_embeds"]
    gen = torch.Generator().manual_seed(9)
    x, ctx = torch.randn(1, 128, 2, 2, generator=gen), torch.randn(1, 512, 24, generator=gen)
    sigma = torch.tensor([0.6])

    def theirs(guidance):
        with torch.no_grad():
            out = m(
                hidden_states=Flux2KleinPipeline._pack_latents(x),
                encoder_hidden_states=ctx,
                timestep=sigma,
                img_ids=Flux2KleinPipeline._prepare_latent_ids(x),
                txt_ids=Flux2KleinPipeline._prepare_text_ids(ctx),
                guidance=guidance,
                return_dict=False,
            )[0]
        return out.transpose(1, 2).reshape(x.shape)

    for cond, guidance in (
        ({}, torch.tensor([3.5])),
        ({"guidance": 5.0}, torch.tensor([5.0])),
        ({"guidance_disabled": True}, None),
    ):
        out = model.apply(x, sigma, {"context": ctx, **cond})
        assert torch.allclose(out, theirs(guidance), atol=2e-5, rtol=0), cond
    default, five = (model.apply(x, sigma, {"context": ctx, **cond}) for cond in ({}, {"guidance": 5.0}))
    assert not torch.allclose(default, five)


def test_reference_latents_join_as_the_klein_pipeline_joins_its_image_latents(klein_file, transformer):
    """ReferenceLatent on FLUX.2 (editing): the references' tokens follow the image's at time coordinates 10, 20,
    ... (ComfyUI's "index" method with scale 10), as diffusers' Klein pipeline places its input images; only the
    image's tokens come back. Other methods are refused."""
    model = load_any_diffusion_model(_ref("diffusion_model", klein_file))
    gen = torch.Generator().manual_seed(10)
    x, context = torch.randn(1, 128, 3, 4, generator=gen), torch.randn(1, 512, 48, generator=gen)
    refs = [torch.randn(1, 128, 2, 2, generator=gen), torch.randn(1, 128, 3, 1, generator=gen)]
    sigma = torch.tensor([0.8])
    out = model.apply(x, sigma, {"context": context, "ref_latents": refs})
    with torch.no_grad():
        packed = torch.cat(
            [Flux2KleinPipeline._pack_latents(x)] + [Flux2KleinPipeline._pack_latents(r) for r in refs], dim=1
        )
        ids = torch.cat([Flux2KleinPipeline._prepare_latent_ids(x), Flux2KleinPipeline._prepare_image_ids(refs)], dim=1)
        ref = transformer(
            hidden_states=packed,
            encoder_hidden_states=context,
            timestep=sigma,
            img_ids=ids,
            txt_ids=Flux2KleinPipeline._prepare_text_ids(context),
            guidance=None,
            return_dict=False,
        )[0][:, :12]
    assert torch.allclose(out, ref.transpose(1, 2).reshape(x.shape), atol=2e-5, rtol=0)
    assert not torch.allclose(out, model.apply(x, sigma, {"context": context}))
    with pytest.raises(NotImplementedError, match="offset"):
        model.apply(x, sigma, {"context": context, "ref_latents": refs, "ref_latents_method": "offset"})


def test_bfloat16_files_embed_sigma_in_float32_as_comfyui_does(tmp_path, transformer):
    """Real FLUX.2 files are bfloat16 and run in it. ComfyUI computes the timestep's sinusoids from sigma x 1000 in
    float32 and casts them to the weights' dtype; diffusers would first cast sigma and sigma x 1000 to it (the
    last sigma of Klein's 4-step schedule at 1024x1024 embeds as 764 instead of 767.2).
    The time embedding the blocks get is ComfyUI's."""
    from diffusers.models.embeddings import get_timestep_embedding

    path = tmp_path / "flux2-bf16.safetensors"
    save_file({k: v.to(torch.bfloat16) for k, v in diffusers_to_bfl(transformer.state_dict()).items()}, str(path))
    model = load_any_diffusion_model(_ref("diffusion_model", path))
    assert model.dtype == torch.bfloat16
    seen = []
    handle = model.module.time_guidance_embed.register_forward_hook(lambda m, args, out: seen.append(out))
    from nodes.library.flux2 import flux2_sigmas

    sigma = flux2_sigmas(4, 1024, 1024)[3:4]
    try:
        model.apply(torch.randn(1, 128, 2, 2), sigma, {"context": torch.randn(1, 512, 48)})
    finally:
        handle.remove()
    embed = model.module.time_guidance_embed
    with torch.no_grad():
        comfyui = embed.timestep_embedder(
            get_timestep_embedding(sigma * 1000, 256, flip_sin_to_cos=True, downscale_freq_shift=0).to(torch.bfloat16)
        )
        cast_first = embed.timestep_embedder(
            get_timestep_embedding(
                sigma.to(torch.bfloat16) * 1000, 256, flip_sin_to_cos=True, downscale_freq_shift=0
            ).to(torch.bfloat16)
        )
    assert torch.equal(seen[0], comfyui) and not torch.equal(seen[0], cast_first)
