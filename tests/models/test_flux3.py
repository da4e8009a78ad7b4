"""FLUX 3: detection of BFL's published layout, loading on diffusers' Flux3Transformer2DModel, one denoising step
(DiffusionModel.apply on ComfyUI's FLUX.2 latent [B,128,h,w] and sigma, with and without reference latents) equal
to diffusers' forward with the ids diffusers 0.42's Flux3 modular pipeline builds, and the text encoder (CLIPLoader
type flux3 on a Qwen3-VL file) equal to the pipeline's Flux3TextEncoderStep on the same tiny weights. No ComfyUI
runnable here has FLUX 3, and its source was not readable: the reference is diffusers, not ComfyUI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from diffusers.modular_pipelines.flux3.before_denoise import (
    Flux3TextRoPEInputsStep,
    _prepare_image_ids,
)
from diffusers.modular_pipelines.flux3.encoders import Flux3TextEncoderStep
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerFast

from nodes.arch import latent_format, sampling_config
from nodes.loaders import CLIPLoader, make_ref
from nodes.models import loader
from nodes.models.components import FLUX2_LATENT
from nodes.models.detect import probe
from nodes.models.errors import ModelLoadError
from nodes.models.flux3_demo import CONFIG, build_demo_flux3, tiny_text_encoder, tiny_transformer


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flux3")
    path, text = build_demo_flux3(root)[::2]
    distilled = root / "diffusion_models" / "flux3_klein_distilled_tiny.safetensors"
    prefixed = root / "flux3_prefixed.safetensors"
    save_file({f"model.diffusion_model.{k}": v for k, v in load_file(path).items()}, str(prefixed))
    return {"bare": path, "prefixed": prefixed, "text": text, "root": root, "distilled": distilled}


@pytest.fixture(scope="module")
def model(files):
    return loader.load_diffusion_model(make_ref("diffusion_model", "flux3", [files["bare"]]))


@pytest.fixture(scope="module")
def encoder(files):
    return loader.load_text_encoder(make_ref("text_encoder", "flux3", [files["text"]], clip_type="flux3"))


def test_published_layout_is_detected(files):
    names = set(load_file(files["bare"]).keys())
    assert {
        "emb_in.image.weight",
        "emb_in.image_cond.weight",
        "txt_in.weight",
        "time_in.in_layer.weight",
        "early_stream_modulations.image.lin.weight",
        "single_stream_modulations.txt.lin.weight",
        "content_mode_blocks.image_cond.0.q_proj.weight",
        "txt_mode_blocks.0.norm.query_norm.scale",
        "single_blocks.1.attn_out.weight",
        "single_blocks.1.mlp_in.weight",
        "final_layer.image.adaLN_modulation.1.weight",
    } <= names
    for key in ("bare", "prefixed"):
        info = probe(files[key])
        assert (info.arch, info.kind, info.layout) == ("flux3", "diffusion_model", "bfl")
    assert probe(files["prefixed"]).prefix == "model.diffusion_model."
    assert probe(files["text"]).arch == "qwen3vl"


def test_config_from_shapes(model, files):
    assert model.arch == "flux3"
    assert {k: model.config[k] for k in CONFIG} == CONFIG and model.config["flow_map"] is False
    assert model.latent_format is FLUX2_LATENT is latent_format("flux3")
    assert model.sampling == sampling_config("flux3") == {"kind": "flow", "shift": 6.93, "multiplier": 1.0}
    prefixed = loader.load_diffusion_model(make_ref("diffusion_model", "flux3", [files["prefixed"]]))
    assert all(torch.equal(a, b) for a, b in zip(prefixed.module.parameters(), model.module.parameters(), strict=True))


def _reference_step(x, sigma, context, refs=()):
    """diffusers' pipeline path: tokens, its image / reference / text ids, its transformer, back to the grid."""
    ref = tiny_transformer()
    b, c, h, w = x.shape
    extra = {}
    if refs:
        extra["image_cond_hidden_states"] = torch.cat([r.flatten(2).transpose(1, 2) for r in refs], 1).expand(b, -1, -1)
        extra["image_cond_ids"] = torch.cat(
            [_prepare_image_ids(r.shape[-2], r.shape[-1], 0.5, l_coord=-(1 + i)) for i, r in enumerate(refs)]
        )
    with torch.no_grad():
        out = ref(
            hidden_states=x.flatten(2).transpose(1, 2),
            encoder_hidden_states=context,
            timestep=sigma,
            img_ids=_prepare_image_ids(h, w, 0.5),
            txt_ids=Flux3TextRoPEInputsStep._prepare_text_ids(context),
            return_dict=False,
            **extra,
        )[0]
    return out.transpose(1, 2).reshape(b, c, h, w)


@pytest.mark.parametrize("batch", [1, 2])
def test_one_step_equals_diffusers(model, batch):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 128, 3, 4, generator=gen)
    sigma = torch.tensor([0.7, 0.3][:batch])
    context = torch.randn(batch, 6, CONFIG["joint_attention_dim"], generator=gen)
    with torch.no_grad():
        got = model.apply(x, sigma, {"context": context})
    expected = _reference_step(x, sigma, context)
    assert got.shape == x.shape
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()


def test_reference_latents_join_as_image_cond_tokens(model):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 128, 2, 3, generator=gen)
    refs = [torch.randn(1, 128, 2, 2, generator=gen), torch.randn(1, 128, 3, 1, generator=gen)]
    context = torch.randn(1, 4, CONFIG["joint_attention_dim"], generator=gen)
    sigma = torch.tensor([0.5])
    with torch.no_grad():
        got = model.apply(x, sigma, {"context": context, "ref_latents": refs})
        plain = model.apply(x, sigma, {"context": context})
    expected = _reference_step(x, sigma, context, refs)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()
    assert not torch.allclose(got, plain, atol=1e-3)


def test_wrong_context_is_refused_by_name(model):
    with pytest.raises(ValueError, match="128 wide.*type flux3"):
        model.apply(torch.zeros(1, 128, 2, 2), torch.tensor([0.5]), {"context": torch.zeros(1, 5, 64)})


def test_truncated_file_is_refused(files, tmp_path):
    sd = load_file(files["bare"])
    del sd["single_blocks.1.mlp_out.weight"]
    bad = tmp_path / "flux3_broken.safetensors"
    save_file(sd, str(bad))
    with pytest.raises(ModelLoadError, match="FLUX 3 transformer.*missing"):
        loader.load_diffusion_model(make_ref("diffusion_model", "flux3", [bad]))


def test_demo_files_are_byte_identical_on_rebuild(files, tmp_path):
    for again in build_demo_flux3(tmp_path):
        assert again.read_bytes() == (files["root"] / again.relative_to(tmp_path)).read_bytes()


# ---- text encoder ---------------------------------------------------------------------------------------------


class _Processor:
    """The two things Flux3TextEncoderStep asks of its AutoProcessor, over our shipped Qwen vocabulary: the
    Qwen3-VL instruct chat template of one plain user turn, and the tokenizer itself."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast) -> None:
        self.tokenizer = tokenizer

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        assert not tokenize and add_generation_prompt
        (message,) = messages
        return f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def diffusers_encode(encoder, files):
    ref = tiny_text_encoder()
    ref.load_state_dict(load_file(files["text"]), strict=False)  # lm_head is not in the file and not used
    processor = _Processor(PreTrainedTokenizerFast(tokenizer_object=encoder.tokenizer._tok, pad_token="<|endoftext|>"))

    def encode(prompt: str) -> torch.Tensor:
        with torch.no_grad():
            return Flux3TextEncoderStep._get_qwen3_vl_prompt_embeds(ref, processor, prompt, device="cpu")

    return encode


@pytest.mark.parametrize("prompt", ["a red fox in the snow", "", "word " * 90])
def test_text_encoder_equals_diffusers(encoder, diffusers_encode, prompt):
    torch.set_num_threads(1)
    tokens = encoder.tokenize(prompt)
    assert len(tokens["qwen3vl_4b"][0]) % 80 == 0
    got, pooled = encoder.encode(tokens)
    expected = diffusers_encode(prompt)
    assert pooled is None and got.shape == expected.shape == (1, got.shape[1], 8 * 16)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()


def test_cliploader_type_flux3_on_a_qwen3vl_file(files, monkeypatch):
    import nodes.loaders as loaders_mod

    monkeypatch.setattr(loaders_mod, "model_file", lambda folder, name, what: files["text"])
    (ref,) = CLIPLoader().load_clip("qwen3vl_4b_flux3_tiny.safetensors", "flux3")
    assert ref.arch == "flux3"
    with pytest.raises(ValueError, match="as FLUX 3's with type flux3"):
        CLIPLoader().load_clip("qwen3vl_4b_flux3_tiny.safetensors", "flux2")
    # another kind of file under type flux3 is refused by name (it used to load as another family's encoder)
    monkeypatch.setattr(loaders_mod, "model_file", lambda folder, name, what: files["bare"])
    with pytest.raises(ValueError, match="is a flux3 file; CLIPLoader type flux3 loads FLUX 3's Qwen3-VL-4B"):
        CLIPLoader().load_clip("flux3_klein_tiny.safetensors", "flux3")


def test_step_distilled_flow_map_model_takes_the_next_sigma(files):
    """The distilled templates' model carries `ref_time_in` (the embedder of the sigma each step jumps to): a step
    at sigma on the sampler's schedule passes the next one (0 after the last) as diffusers' distilled loop passes
    the next timestep; off the schedule, or without one, it is refused by name."""
    torch.set_num_threads(1)
    assert probe(files["distilled"]).arch == "flux3"
    model = loader.load_diffusion_model(make_ref("diffusion_model", "flux3", [files["distilled"]]))
    assert model.config["flow_map"] is True
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 128, 2, 3, generator=gen)
    context = torch.randn(2, 4, CONFIG["joint_attention_dim"], generator=gen)
    schedule = torch.tensor([1.0, 0.8, 0.45, 0.0])
    ref = tiny_transformer(flow_map=True)
    for sigma, target in ((0.8, 0.45), (0.45, 0.0)):
        with torch.no_grad():
            got = model.apply(x, torch.tensor([sigma]), {"context": context, "sample_sigmas": schedule})
            expected = ref(
                hidden_states=x.flatten(2).transpose(1, 2),
                encoder_hidden_states=context,
                timestep=torch.tensor([sigma, sigma]),
                target_timestep=torch.tensor([target, target]),
                img_ids=_prepare_image_ids(2, 3, 0.5),
                txt_ids=Flux3TextRoPEInputsStep._prepare_text_ids(context),
                return_dict=False,
            )[0]
        assert torch.allclose(got, expected.transpose(1, 2).reshape(x.shape), atol=1e-5, rtol=0)
    with pytest.raises(NotImplementedError, match="step-distilled FLUX 3.*schedule"):
        model.apply(x, torch.tensor([0.8]), {"context": context})
    with pytest.raises(ValueError, match="not on the sampler's schedule"):
        model.apply(x, torch.tensor([0.6]), {"context": context, "sample_sigmas": schedule})


def test_scaled_fp8_file_is_multiplied_out(files, tmp_path):
    """ComfyUI's scaled fp8 layout (float8 weights, a float32 scale_weight beside each, the scaled_fp8 marker):
    the model holds weight x scale."""
    sd = load_file(files["bare"])
    scaled, expected = {"scaled_fp8": torch.zeros(2, dtype=torch.float8_e4m3fn)}, {}
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            scale = value.abs().max() / 448
            q = (value / scale).to(torch.float8_e4m3fn)
            scaled[key], scaled[key[: -len("weight")] + "scale_weight"] = q, scale.reshape(1)
            expected[key] = q.float() * scale
        else:
            scaled[key] = value
    path = tmp_path / "flux3_fp8_scaled_tiny.safetensors"
    save_file(scaled, str(path))
    assert probe(path).arch == "flux3"
    module = loader.load_diffusion_model(make_ref("diffusion_model", "flux3", [path])).module
    assert torch.equal(module.x_embedders["image"].weight, expected["emb_in.image.weight"])
    assert torch.equal(
        module.single_transformer_blocks[1].attn.to_out[0].weight, expected["single_blocks.1.attn_out.weight"]
    )


@pytest.mark.parametrize("naming", ["bfl", "kohya", "diffusers"])
def test_lora_is_merged(files, tmp_path, naming):
    """A LoRA (LoraLoaderModelOnly) in BFL's names as ai-toolkit writes them (`diffusion_model.single_blocks.N.
    q_proj`), kohya's (`lora_unet_single_blocks_N_q_proj`) or diffusers' (`transformer.single_transformer_blocks.N.
    attn.to_q`): W + strength * alpha/rank * B @ A on that layer, the others untouched; the output adaLN in BFL's
    names lands on BFL's rows (diffusers swaps them into [scale, shift])."""
    from cluster.refs import Patch
    from nodes.loaders import file_digest

    sd = load_file(files["bare"])
    gen = torch.Generator().manual_seed(6)
    layers = {
        "single_blocks.1.q_proj": "single_transformer_blocks.1.attn.to_q",
        "content_mode_blocks.image.0.mlp_in": "mode_blocks.image.0.ff.linear_in",
        "txt_in": "context_embedder",
    }
    if naming != "diffusers":
        layers["final_layer.image.adaLN_modulation.1"] = "norm_out.linear"
    lora, expected = {}, {}
    for bfl, theirs in layers.items():
        w = sd[bfl + ".weight"]
        a, b = torch.randn(4, w.shape[1], generator=gen), torch.randn(w.shape[0], 4, generator=gen)
        name = {
            "bfl": f"diffusion_model.{bfl}",
            "kohya": "lora_unet_" + bfl.replace(".", "_"),
            "diffusers": f"transformer.{theirs}",
        }[naming]
        lora |= {f"{name}.lora_A.weight": a, f"{name}.lora_B.weight": b, f"{name}.alpha": torch.tensor(2.0)}
        merged = w + 0.8 * (2.0 / 4) * (b @ a)
        if theirs == "norm_out.linear":  # diffusers' [scale, shift] of BFL's [shift, scale]
            shift, scale = merged.chunk(2)
            merged = torch.cat([scale, shift])
        expected[theirs] = merged
    path = tmp_path / f"flux3_lora_{naming}.safetensors"
    save_file(lora, str(path))
    ref = make_ref("diffusion_model", "flux3", [files["bare"]]).with_patch(Patch(str(path), file_digest(path), 0.8))
    got = loader.load_diffusion_model(ref).module.state_dict()
    for theirs, want in expected.items():
        torch.testing.assert_close(got[theirs + ".weight"], want, rtol=0, atol=1e-5)
    assert torch.equal(got["single_transformer_blocks.1.attn.to_k.weight"], sd["single_blocks.1.k_proj.weight"])


def test_lora_for_another_model_is_refused(files, tmp_path):
    from cluster.refs import Patch
    from nodes.loaders import file_digest

    path = tmp_path / "not_flux3.safetensors"
    save_file(
        {
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_A.weight": torch.zeros(4, 32),
            "diffusion_model.double_blocks.0.img_attn.qkv.lora_B.weight": torch.zeros(96, 4),
        },
        str(path),
    )
    ref = make_ref("diffusion_model", "flux3", [files["bare"]]).with_patch(Patch(str(path), file_digest(path), 1.0))
    with pytest.raises(ModelLoadError, match="another architecture"):
        loader.load_diffusion_model(ref)
