"""Names today's packs call inside their nodes (docs/compat-inventory.md, "inside functions"), with ComfyUI's
behaviour on this backend's objects: the attention kernels' fallbacks, the UNet blocks packs build side
networks from, and ComfyUI's in-process sampling entry points."""

from __future__ import annotations

import asyncio

import pytest
import torch
import torch.nn.functional as F

from comfy_bridge.compat.comfy.ldm.modules import attention
from comfy_bridge.compat.comfy.ldm.modules.diffusionmodules import openaimodel
from comfy_bridge.packs.origin import UnsupportedFeature

CKPT = "sd1-tiny.safetensors"


# -- attention kernels ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["attention_sage", "attention_flash"])
def test_missing_kernels_fall_back_to_pytorch_attention_as_comfyui(name, caplog):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 8)
    fn = getattr(attention, name)
    torch.testing.assert_close(fn(q, k, v, 2), attention.attention_pytorch(q, k, v, 2))
    heads_first = [t.reshape(2, -1, 2, 4).transpose(1, 2) for t in (q, k, v)]
    torch.testing.assert_close(
        fn(*heads_first, 2, skip_reshape=True, skip_output_reshape=True),
        attention.attention_pytorch(*heads_first, 2, skip_reshape=True, skip_output_reshape=True),
    )
    assert "pytorch" in caplog.text or "SDPA" in caplog.text


def test_flash_attention_with_a_mask_uses_sdpa_with_that_mask():
    torch.manual_seed(0)
    q, k, v, mask = torch.randn(1, 4, 8), torch.randn(1, 6, 8), torch.randn(1, 6, 8), torch.randn(4, 6)
    torch.testing.assert_close(
        attention.attention_flash(q, k, v, 2, mask=mask), attention.attention_pytorch(q, k, v, 2, mask=mask)
    )


def test_xformers_attention_without_xformers_raises_as_comfyui():
    q = torch.randn(1, 4, 8)
    with pytest.raises(UnsupportedFeature, match="attention_xformers.*xformers package is not installed"):
        attention.attention_xformers(q, q, q, 2)


# -- UNet blocks -----------------------------------------------------------------------------------------------


def test_resblock_has_comfyuis_parameters_and_computes_its_residual():
    torch.manual_seed(0)
    block = openaimodel.ResBlock(32, 16, 0.0, out_channels=64)
    assert sorted(block.state_dict()) == sorted(
        [
            "in_layers.0.weight",
            "in_layers.0.bias",
            "in_layers.2.weight",
            "in_layers.2.bias",
            "emb_layers.1.weight",
            "emb_layers.1.bias",
            "out_layers.0.weight",
            "out_layers.0.bias",
            "out_layers.3.weight",
            "out_layers.3.bias",
            "skip_connection.weight",
            "skip_connection.bias",
        ]
    )
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.1)
    x, emb = torch.randn(2, 32, 8, 8), torch.randn(2, 16)
    sd = block.state_dict()
    h = F.conv2d(
        F.silu(F.group_norm(x, 32, sd["in_layers.0.weight"], sd["in_layers.0.bias"])),
        sd["in_layers.2.weight"],
        sd["in_layers.2.bias"],
        padding=1,
    )
    h = h + F.linear(F.silu(emb), sd["emb_layers.1.weight"], sd["emb_layers.1.bias"])[:, :, None, None]
    h = F.conv2d(
        F.silu(F.group_norm(h, 32, sd["out_layers.0.weight"], sd["out_layers.0.bias"])),
        sd["out_layers.3.weight"],
        sd["out_layers.3.bias"],
        padding=1,
    )
    want = F.conv2d(x, sd["skip_connection.weight"], sd["skip_connection.bias"]) + h
    torch.testing.assert_close(block(x, emb), want)


def test_resblock_scale_shift_and_resampling():
    torch.manual_seed(0)
    block = openaimodel.ResBlock(32, 16, 0.0, use_scale_shift_norm=True, down=True)
    assert block.emb_layers[1].out_features == 64 and isinstance(block.skip_connection, torch.nn.Identity)
    assert block(torch.randn(1, 32, 8, 8), torch.randn(1, 16)).shape == (1, 32, 4, 4)
    up = openaimodel.ResBlock(32, 16, 0.0, up=True, skip_t_emb=True)
    assert up.emb_layers is None and up(torch.randn(1, 32, 4, 4), None).shape == (1, 32, 8, 8)


def test_upsample_and_downsample():
    torch.manual_seed(0)
    x = torch.randn(1, 4, 5, 6)
    plain = openaimodel.Upsample(4, False)
    torch.testing.assert_close(plain(x), F.interpolate(x, scale_factor=2, mode="nearest"))
    assert plain(x, output_shape=(1, 4, 11, 13)).shape == (1, 4, 11, 13)
    conv = openaimodel.Upsample(4, True, out_channels=8)
    for param in conv.parameters():  # ComfyUI's ops leave weights uninitialised (they are loaded)
        torch.nn.init.normal_(param, std=0.1)
    torch.testing.assert_close(conv(x), conv.conv(F.interpolate(x, scale_factor=2, mode="nearest")))
    assert openaimodel.Upsample(4, False, dims=3)(torch.randn(1, 4, 3, 5, 6)).shape == (1, 4, 3, 10, 12)
    down = openaimodel.Downsample(4, True)
    assert sorted(down.state_dict()) == ["op.bias", "op.weight"] and down(x).shape == (1, 4, 3, 3)
    torch.testing.assert_close(openaimodel.Downsample(4, False)(x), F.avg_pool2d(x, 2))


def test_forward_timestep_embed_gives_each_layer_its_inputs():
    seen = []

    class Probe(openaimodel.TimestepBlock):
        def forward(self, x, emb):
            seen.append(("timestep", emb))
            return x + emb

    class Patched(torch.nn.Identity):
        pass

    def handler(layer, x, emb, context, options, output_shape, *rest):
        seen.append(("patched", context))
        return x * 2

    options = {"patches": {"forward_timestep_embed_patch": [(Patched, handler)]}}
    seq = openaimodel.TimestepEmbedSequential(Probe(), openaimodel.Upsample(1, False), Patched(), torch.nn.Flatten())
    out = seq(torch.ones(1, 1, 2, 2), torch.tensor(1.0), "ctx", options, (1, 1, 3, 3))
    assert seen == [("timestep", torch.tensor(1.0)), ("patched", "ctx")]
    torch.testing.assert_close(out, torch.full((1, 9), 4.0))  # (1 + 1) upsampled to 3x3, doubled, flattened
    assert openaimodel.forward_timestep_embed([], torch.zeros(1), None) is not None


# -- ComfyUI's sampling entry points ----------------------------------------------------------------------------


@pytest.fixture
def sd1(demo_workspace, fixed_threads):
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    model, clip, _ = CheckpointLoaderSimple().load_checkpoint(CKPT)

    async def encode():
        enc = CLIPTextEncode()
        return (await enc.encode(clip, "a red fox"))[0], (await enc.encode(clip, ""))[0]

    positive, negative = asyncio.run(encode())
    return model, positive, negative


def test_sample_custom_equals_our_sampler_custom_node(sd1):
    from comfy_bridge.compat.comfy import sample, samplers
    from nodes.library.custom_sampler import SamplerCustom
    from nodes.sampling.noise import prepare_noise

    model, positive, negative = sd1
    latent = torch.zeros(1, 4, 8, 8)
    sampler = samplers.sampler_object("euler_ancestral")
    sigmas = torch.tensor([14.6, 3.0, 0.6, 0.0])
    (want, _) = asyncio.run(
        SamplerCustom().sample(model, True, 7, 4.0, positive, negative, sampler, sigmas, {"samples": latent})
    )
    noise = prepare_noise(latent, 7)
    got = sample.sample_custom(model, noise, 4.0, sampler, sigmas, positive, negative, latent, seed=7)
    torch.testing.assert_close(got, want["samples"])
    got = samplers.sample(model, noise, positive, negative, 4.0, "cpu", sampler, sigmas, latent_image=latent, seed=7)
    torch.testing.assert_close(got, want["samples"])


def test_sample_equals_common_ksampler(sd1):
    from comfy_bridge.compat.comfy import sample
    from nodes.ksampler import common_ksampler
    from nodes.sampling.noise import prepare_noise

    model, positive, negative = sd1
    latent = torch.zeros(1, 4, 8, 8)
    (want,) = asyncio.run(
        common_ksampler(model, 3, 3, 5.0, "euler", "karras", positive, negative, {"samples": latent}, denoise=0.8)
    )
    got = sample.sample(
        model, prepare_noise(latent, 3), 3, 5.0, "euler", "karras", positive, negative, latent, denoise=0.8, seed=3
    )
    torch.testing.assert_close(got, want["samples"])


# -- the video tiny autoencoder ---------------------------------------------------------------------------------


def test_memblock_runner_gives_each_block_the_previous_frame_in_both_modes():
    from comfy_bridge.compat.comfy.taesd import taehv

    class Remember(taehv.MemBlock):
        def forward(self, x, past):
            return x + 10 * past

    class PairSum(taehv.TPool):
        def forward(self, x):
            return x.reshape(-1, 2, *x.shape[1:]).sum(1)

    class Twice(taehv.TGrow):
        def forward(self, x):
            return torch.stack([x, x + 0.5], 1).flatten(0, 1)

    model = torch.nn.Sequential(
        Remember(1, 1, torch.nn.Identity()), PairSum(1, 2), Twice(1, 2), Remember(1, 1, torch.nn.Identity())
    )
    frames = torch.tensor([1.0, 2.0, 3.0, 4.0]).reshape(1, 4, 1, 1, 1)
    # first block: 1, 2+10, 3+20, 4+30; pooled: 13, 57; grown: 13, 13.5, 57, 57.5; last block adds 10x previous
    want = torch.tensor([13.0, 13.5 + 130, 57 + 135, 57.5 + 570]).reshape(1, 4, 1, 1, 1)
    for parallel in (False, True):
        torch.testing.assert_close(taehv.apply_model_with_memblocks(model, frames, parallel, False), want)


@pytest.mark.parametrize("latent_channels", [16, 48])
def test_taehv_loads_comfyuis_layout_and_codes_video(latent_channels):
    from comfy_bridge.compat.comfy.taesd.taehv import TAEHV

    torch.manual_seed(0)
    model = TAEHV(latent_channels)
    sd = model.state_dict()
    assert {
        "encoder.0.weight",
        "encoder.17.weight",
        "decoder.1.weight",
        "decoder.22.bias",
        "decoder.3.conv.0.weight",
        "decoder.7.conv.weight",
        "encoder.2.conv.weight",
    } <= set(sd)
    assert sd["decoder.22.bias"].shape[0] == 3 * model.patch_size**2
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.05)
    video = torch.rand(1, 3, 8, 32, 32)
    with torch.no_grad():
        latent = model.encode(video)
        frames = model.decode(latent)
        model.parallel = True
        torch.testing.assert_close(model.encode(video), latent, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(model.decode(latent), frames, rtol=1e-3, atol=1e-3)
    assert latent.shape == (1, latent_channels, 2, 32 // 8 // model.patch_size, 32 // 8 // model.patch_size)
    assert frames.shape == (1, 3, 2 * 4 - 3, 32, 32)  # 4x in time, the first 3 frames trimmed


# -- torch.compile of a MODEL -------------------------------------------------------------------------------------


def test_set_torch_compile_wrapper_compiles_as_the_torch_compile_node(sd1):
    from comfy_bridge.compat.comfy_api.torch_helpers import (
        TORCH_COMPILE_KWARGS,
        set_torch_compile_wrapper,
    )
    from comfy_bridge.packs.proxies import wrap
    from nodes.library.torch_compile import TorchCompileModel
    from nodes.modelfns.model_options import COMPILE

    model = wrap(sd1[0])
    patched = model.clone()
    assert set_torch_compile_wrapper(patched, "inductor", mode="max-autotune", dynamic=False) is None
    assert patched.option(COMPILE) == "inductor" and model.option(COMPILE) is None
    assert patched.key == TorchCompileModel().patch(model, "inductor")[0].key
    assert patched.model_options[TORCH_COMPILE_KWARGS] == {
        "backend": "inductor",
        "options": None,
        "mode": "max-autotune",
        "fullgraph": False,
        "dynamic": False,
    }
    with pytest.raises(ValueError, match="backend"):
        set_torch_compile_wrapper(patched, "")


# -- tokenizers ---------------------------------------------------------------------------------------------------

PROMPTS = [
    "a (red:1.2) fox in the snow",
    "",
    "(((masterpiece))), best quality, " * 12 + "a castle",
    "\\(literal\\) parens and (nested (weights:0.8):1.1)",
    "supercalifragilisticexpialidocious " * 12,
]


def test_sdxl_tokenizer_windows_equal_this_backends_clip_tokenization():
    from comfy_bridge.compat.comfy.sdxl_clip import SDXLTokenizer
    from nodes.models.tokenizer import (
        OPENAI_VOCAB_SIZE,
        SDTokenizer,
        bpe_for_vocab_size,
    )

    bpe = bpe_for_vocab_size(OPENAI_VOCAB_SIZE)
    ours_l, ours_g = SDTokenizer(bpe), SDTokenizer(bpe, pad_with_end=False)
    tokenizer = SDXLTokenizer()
    for text in PROMPTS:
        out = tokenizer.tokenize_with_weights(text)
        assert out == {"g": ours_g.tokenize_with_weights(text), "l": ours_l.tokenize_with_weights(text)}, text
    assert len(tokenizer.tokenize_with_weights(PROMPTS[4])["l"]) > 1  # 77-token windows


def test_word_ids_number_the_segments():
    from comfy_bridge.compat.comfy.sdxl_clip import SDXLTokenizer

    (window,) = SDXLTokenizer().tokenize_with_weights("a (red:1.2) fox", return_word_ids=True)["l"]
    assert window[:5] == [(49406, 1.0, 0), (320, 1.0, 1), (736, 1.2, 2), (3240, 1.0, 3), (49407, 1.0, 0)]
    assert window[5:] == [(49407, 1.0, 0)] * 72


def test_sd3_tokenizer_t5_windows_are_comfyuis_recorded_ids():
    import json
    from pathlib import Path

    from comfy_bridge.compat.comfy.text_encoders.sd3_clip import SD3Tokenizer

    fixture = Path(__file__).parents[1] / "models" / "fixtures" / "comfyui_t5_tokenizer.json"
    cases = json.loads(fixture.read_text())["cases"]
    tokenizer = SD3Tokenizer()
    mismatched = []
    for case in cases[:120]:
        windows = tokenizer.tokenize_with_weights(case["text"])["t5xxl"]
        weights = [[w, i, j] for i, window in enumerate(windows) for j, (_, w) in enumerate(window) if w != 1.0]
        if [[t for t, _ in window] for window in windows] != case["ids"] or weights != case["weights"]:
            mismatched.append(case["text"])
    assert mismatched == []
    assert set(tokenizer.tokenize_with_weights("x")) == {"g", "l", "t5xxl"}


def test_embeddings_in_a_prompt_take_their_vectors(tmp_path):
    from safetensors.torch import save_file

    from comfy_bridge.compat.comfy.sd1_clip import SD1Tokenizer

    vectors = torch.randn(2, 768)
    save_file({"emb_params": vectors}, str(tmp_path / "myembed.safetensors"))
    (window,) = SD1Tokenizer(embedding_directory=str(tmp_path)).tokenize_with_weights(
        "a embedding:myembed, fox", return_word_ids=True
    )["l"]
    assert window[1] == (320, 1.0, 1)
    assert torch.equal(window[2][0], vectors[0]) and torch.equal(window[3][0], vectors[1]) and window[2][2] == 2
    assert [t for t, _, i in window[4:7]] == [267, 3240, 49407] and window[4][2] == 3  # ", fox" after it
    plain = SD1Tokenizer().tokenize_with_weights("a embedding:myembed, fox")["l"][0]
    assert all(isinstance(t, int) for t, _ in plain)  # no embedding directory: the words are text


# -- loaders that take state dicts ------------------------------------------------------------------------------


def test_load_diffusion_model_state_dict_samples_as_the_checkpoints_model(sd1, demo_workspace):
    from comfy_bridge.compat.comfy import sd, utils
    from nodes.ksampler import common_ksampler

    model, positive, negative = sd1
    checkpoint = utils.load_torch_file(str(demo_workspace.models_dir / "checkpoints" / CKPT))
    loaded = sd.load_diffusion_model_state_dict(checkpoint)  # the checkpoint's prefix is taken off
    assert loaded is not None and loaded.arch == model.arch
    latent = {"samples": torch.zeros(1, 4, 8, 8)}

    def run(m):
        return asyncio.run(common_ksampler(m, 1, 2, 3.0, "euler", "normal", positive, negative, latent))[0]["samples"]

    torch.testing.assert_close(run(loaded), run(model))
    assert sd.load_diffusion_model_state_dict({"not.a.model": torch.zeros(2)}) is None
    with pytest.raises(UnsupportedFeature, match="custom_operations"):
        sd.load_diffusion_model_state_dict(checkpoint, model_options={"custom_operations": object})


def test_load_text_encoder_state_dicts_encodes_as_the_checkpoints_clip(demo_workspace, fixed_threads):
    from comfy_bridge.compat.comfy import sd, utils
    from nodes.loaders import CheckpointLoaderSimple
    from nodes.model_nodes import CLIPTextEncode

    _, clip, _ = CheckpointLoaderSimple().load_checkpoint(CKPT)
    checkpoint = utils.load_torch_file(str(demo_workspace.models_dir / "checkpoints" / CKPT))
    prefix = "cond_stage_model.transformer."  # what a CLIP-L file holds (text_model.*)
    text_encoder = {k[len(prefix) :]: v for k, v in checkpoint.items() if k.startswith(prefix)}
    loaded = sd.load_text_encoder_state_dicts([text_encoder], clip_type=sd.CLIPType.STABLE_DIFFUSION)

    def encode(c):
        return asyncio.run(CLIPTextEncode().encode(c, "a red fox"))[0][0][0]

    torch.testing.assert_close(encode(loaded), encode(clip))


def test_load_clipvision_from_sd_encodes_as_the_file(demo_workspace, fixed_threads):
    from comfy_bridge.compat.comfy import clip_vision, utils
    from nodes.library.clip_vision import CLIPVisionEncode

    path = demo_workspace.models_dir / "clip_vision" / "clip-vision-tiny.safetensors"
    weights = utils.load_torch_file(str(path))
    image = torch.rand(1, 64, 64, 3, generator=torch.Generator().manual_seed(0))

    def encode(cv):
        return asyncio.run(CLIPVisionEncode().encode(cv, image, "center"))[0].image_embeds

    want = encode(clip_vision.load(str(path)))
    torch.testing.assert_close(encode(clip_vision.load_clipvision_from_sd(weights)), want)
    inside = {f"embedder.model.{k}": v for k, v in weights.items()}  # as a checkpoint holds it
    torch.testing.assert_close(encode(clip_vision.load_clipvision_from_sd(inside, "embedder.model.", True)), want)
    assert clip_vision.load_clipvision_from_sd({"x": torch.zeros(1)}) is None


def test_hooks_from_an_in_memory_lora_sample_as_the_create_hook_lora_node(sd1, demo_workspace):
    from comfy_bridge.compat.comfy import hooks, utils
    from nodes.ksampler import common_ksampler
    from nodes.library.hooks import CreateHookLora

    model, positive, negative = sd1
    lora = utils.load_torch_file(str(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors"))
    model_out, clip_out, group = hooks.load_hook_lora_for_models(model, None, lora, 0.8, 1.0)
    assert model_out.key == model.key and clip_out is None
    (node_group,) = CreateHookLora().create_hook("sd1-tiny-lora.safetensors", 0.8, 0.0)
    latent = {"samples": torch.zeros(1, 4, 8, 8)}

    def run(g):
        pos = positive if g is None else hooks.set_hooks_for_conditioning(positive, g)
        return asyncio.run(common_ksampler(model, 1, 2, 3.0, "euler", "normal", pos, negative, latent))[0]["samples"]

    hooked = run(group)
    torch.testing.assert_close(hooked, run(node_group))
    assert not torch.allclose(hooked, run(None))  # the LoRA changes the image


def test_a_state_dict_is_written_once_and_shared_storage_is_copied(demo_workspace):
    from comfy_bridge.compat.comfy.state_dict_files import state_dict_file
    from comfy_bridge.compat.comfy.utils import load_torch_file

    base = torch.arange(6.0)
    sd = {"a": base, "b": base.view(2, 3), "c": torch.ones(2)}  # a and b share one storage
    first, second = state_dict_file(sd, "test"), state_dict_file(dict(sd), "test")
    assert first == second and len(list(first.parent.glob("*.partial"))) == 0
    back = load_torch_file(str(first))
    assert torch.equal(back["b"], base.view(2, 3)) and torch.equal(back["a"], base)
    with pytest.raises(TypeError, match="'q' is a str"):
        state_dict_file({"q": "not a tensor"}, "test")


# -- diffusers-layout UNet configs --------------------------------------------------------------------------------


def test_unet_config_from_diffusers_unet_is_comfyuis():
    import json
    from pathlib import Path

    from comfy_bridge.compat.comfy import model_detection, supported_models

    fixture = json.loads((Path(__file__).parent / "fixtures" / "comfyui_diffusers_unet_configs.json").read_text())
    assert len(fixture["cases"]) >= 20
    for case in fixture["cases"]:
        sd = {k: torch.empty(shape, device="meta") for k, shape in case["shapes"].items()}
        assert model_detection.unet_config_from_diffusers_unet(sd) == case["config"], case["name"]
    sdxl = next(c for c in fixture["cases"] if c["name"] == "sdxl")
    found = model_detection.model_config_from_diffusers_unet(
        {k: torch.empty(shape, device="meta") for k, shape in sdxl["shapes"].items()}
    )
    assert isinstance(found, supported_models.SDXL)
    assert model_detection.unet_config_from_diffusers_unet({}, torch.float16) is None
