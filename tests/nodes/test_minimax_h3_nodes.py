"""MiniMax H3's empty audio-video latent (shapes as the newest ComfyUI's nodes_minimax_h3 computes them), sampled
by KSampler with the tiny demo transformer: the video and the audio part are denoised together, each step one joint
evaluation, as diffusers 0.42's MiniMax H3 pipeline loop does it (its transformer on the packed sequence, then one
MiniMaxH3Scheduler per stream: the video's at shift 12, the audio's at shift 3; the sampler carries the audio on
the video schedule as ComfyUI's ModelSamplingAV does, which for Euler is the same update); the initial noise is
ComfyUI's, drawn part after part from one CPU generator; VAEDecode decodes the video part."""

from __future__ import annotations

import asyncio

import pytest
import torch

from nodes.arch import sampling_config
from nodes.library.ltxv_av import AVLatent
from nodes.models import minimax_h3 as mh
from nodes.models import minimax_h3_vae as mvae
from nodes.models.minimax_h3_demo import FILES, TEXT_DIM, build_demo_minimax_h3
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.schedules import ksampler_sigmas
from tests.node_calls import active_workspace, call_node


def diffusers_loop(module, shapes, seed: int, context, steps: int, shifts=(12.0, 3.0), conditions=None):
    """diffusers' MiniMax H3 denoising loop from ComfyUI's initial noise: each step one evaluation of the packed
    transformer, then each stream stepped by its own MiniMaxH3Scheduler (timesteps 1 - sigma, data-ward velocity:
    the negation of ComfyUI's output); `conditions`: mh.apply's keyframes, their seed and the prompt rows' tags.
    Returns (video, audio, the video scheduler's sigmas)."""
    from diffusers.schedulers.scheduling_minimax_h3 import MiniMaxH3Scheduler

    gen = torch.Generator().manual_seed(seed)
    video, audio = (torch.randn(shape, generator=gen) for shape in shapes)
    sv, sa = MiniMaxH3Scheduler(shift=shifts[0]), MiniMaxH3Scheduler(shift=shifts[1])
    sv.set_timesteps(steps + 1)
    sa.set_timesteps(steps + 1)
    for i in range(steps):
        out_v, out_a = mh.apply(module, video, audio, context, float(sv.sigmas[i]), shifts=shifts, **(conditions or {}))
        video = sv.step(-out_v, sv.timesteps[i], video, return_dict=False)[0]
        audio = sa.step(-out_a, sa.timesteps[i], audio, return_dict=False)[0]
    return video, audio, sv.sigmas


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("minimax"), build_demo_minimax_h3)


def test_empty_av_latent_shapes_are_comfyuis():
    (latent,) = asyncio.run(call_node("EmptyMiniMaxH3LatentAV", width=64, height=32, length=6))
    video, audio = latent["samples"].unbind()
    # 6 frames snap up to 22 (17k+5): 7 latent frames; 22/24 s at 40 Hz = 36.67 -> 37 audio latents
    assert video.shape == (1, 24, 7, 2, 4) and audio.shape == (1, 32, 2, 37)
    assert not video.any() and not audio.any()


def test_ksampler_denoises_video_and_audio_together(workspace):
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(11)
    context = torch.randn(1, 6, TEXT_DIM, generator=g)
    positive = [[context, {"pooled_output": None}]]
    negative = [[torch.zeros(1, 6, TEXT_DIM), {"pooled_output": None}]]

    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (latent,) = await call_node("EmptyMiniMaxH3LatentAV", width=32, height=32, length=5)
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=7,
            steps=2,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=positive,
            negative=negative,
            latent_image=latent,
            denoise=1.0,
        )
        (vae,) = await call_node("VAELoader", vae_name=FILES["vae"].split("/")[1])
        (frames,) = await call_node("VAEDecode", samples=out, vae=vae)
        return latent, out, frames

    latent, out, frames = asyncio.run(run())
    assert isinstance(out["samples"], AVLatent)
    video, audio = out["samples"].unbind()
    from safetensors.torch import load_file

    module = mh.load_transformer(load_file(workspace.models_dir / FILES["transformer"]))
    shapes = [tuple(p.shape) for p in latent["samples"].unbind()]
    ref_video, ref_audio, ref_sigmas = diffusers_loop(module, shapes, 7, context, 2)
    ms = model_sampling_from_config(sampling_config("minimax_h3"))
    torch.testing.assert_close(ksampler_sigmas(ms, "simple", 2).float(), ref_sigmas.float(), atol=1e-6, rtol=0)
    torch.testing.assert_close(video, ref_video, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, ref_audio, atol=1e-5, rtol=0)
    assert audio.abs().max() > 0.1  # sampled, not the silent latent it started as
    vae = mvae.load_vae(load_file(workspace.models_dir / FILES["vae"]))
    assert frames.shape == (5, 32, 32, 3)
    torch.testing.assert_close(frames, mvae.decode(vae, video), atol=1e-5, rtol=1e-5)


def test_text_to_video_chain(workspace):
    """UNETLoader, CLIPLoader type minimax, MiniMaxH3ImageToVideo (no frames), KSampler, VAEDecode: the node's
    conditioning is CLIPTextEncode's on the prompt, its latent the empty AV latent, and the sampled video the
    hand-written loop over the text encoder's states."""
    torch.set_num_threads(1)
    prompt = "A paper boat drifts down a rain gutter.\nAudio: rain, distant thunder."

    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (clip,) = await call_node(
            "CLIPLoader", clip_name=FILES["text_encoder"].split("/")[1], type="minimax", device="default"
        )
        (vae,) = await call_node("VAELoader", vae_name=FILES["vae"].split("/")[1])
        positive, latent = await call_node(
            "MiniMaxH3ImageToVideo", clip=clip, vae=vae, prompt=prompt, width=32, height=64, length=5
        )
        (negative,) = await call_node("CLIPTextEncode", clip=clip, text="")
        (text,) = await call_node("CLIPTextEncode", clip=clip, text=prompt)
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=3,
            steps=2,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=positive,
            negative=negative,
            latent_image=latent,
            denoise=1.0,
        )
        (frames,) = await call_node("VAEDecode", samples=out, vae=vae)
        return positive, text, latent, out, frames

    positive, text, latent, out, frames = asyncio.run(run())
    torch.testing.assert_close(positive[0][0], text[0][0])
    video, audio = latent["samples"].unbind()
    assert video.shape == (1, 24, 2, 4, 2) and audio.shape == (1, 32, 2, 8)

    from safetensors.torch import load_file

    module = mh.load_transformer(load_file(workspace.models_dir / FILES["transformer"]))
    ref_video, ref_audio, _ = diffusers_loop(module, [video.shape, audio.shape], 3, positive[0][0], 2)
    torch.testing.assert_close(out["samples"].unbind()[0], ref_video, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["samples"].unbind()[1], ref_audio, atol=1e-5, rtol=0)
    assert frames.shape == (5, 64, 32, 3)


def test_first_last_frame_chain(workspace):
    """MiniMaxH3ImageToVideo with a first and a last frame (fl2va), as ComfyUI's node: each picture fitted to the
    canvas with Lanczos (the first stretched, the last cover-cropped), read by the text encoder before the prompt
    (with the rows' modality tags), and encoded by the VAE into one latent frame pinned at pixel frame 0 and at the
    last frame (21 of 22). KSampler's video and audio equal diffusers' loop over its transformer with those
    keyframe rows, noised from the sampling seed as ComfyUI's extra_conds does, and the prompt rows so tagged."""
    from cluster.refs import ModelRef
    from nodes.models.minimax_h3_text import load_text_encoder
    from nodes.upscale import common_upscale

    torch.set_num_threads(1)
    prompt = "A paper boat drifts down a rain gutter.\nAudio: rain, distant thunder."
    g = torch.Generator().manual_seed(6)
    first, last = torch.rand(1, 40, 48, 3, generator=g), torch.rand(2, 48, 24, 4, generator=g)

    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (clip,) = await call_node(
            "CLIPLoader", clip_name=FILES["text_encoder"].split("/")[1], type="minimax", device="default"
        )
        (vae,) = await call_node("VAELoader", vae_name=FILES["vae"].split("/")[1])
        positive, latent = await call_node(
            "MiniMaxH3ImageToVideo",
            clip=clip,
            vae=vae,
            prompt=prompt,
            width=32,
            height=64,
            length=22,
            first_frame=first,
            last_frame=last,
        )
        (negative,) = await call_node("CLIPTextEncode", clip=clip, text="")
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=3,
            steps=2,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=positive,
            negative=negative,
            latent_image=latent,
            denoise=1.0,
        )
        return positive, latent, out

    positive, latent, out = asyncio.run(run())
    from safetensors.torch import load_file

    pictures = [
        common_upscale(image[:1, :, :, :3].movedim(-1, 1), 32, 64, "lanczos", crop).movedim(1, -1)
        for image, crop in ((first, "disabled"), (last, "center"))
    ]
    encoder = load_text_encoder(
        ModelRef("text_encoder", "minimax_h3", ("te.safetensors",), ("0",)),
        load_file(workspace.models_dir / FILES["text_encoder"]),
    )
    tokens = encoder.tokenize(prompt, images=2)
    context, opts = positive[0]
    torch.testing.assert_close(context, encoder.encode(tokens, pictures)[0], atol=1e-6, rtol=0)
    tags = encoder.row_tags(tokens, pictures)
    assert torch.equal(opts["minimax_token_tags"], tags) and (tags == 0).any()
    vae = mvae.load_vae(load_file(workspace.models_dir / FILES["vae"]))
    pinned = opts["minimax_keyframes"]
    assert [kf["resolved_frame_index"] for kf in pinned] == [0, 21]
    for kf, picture in zip(pinned, pictures, strict=True):
        torch.testing.assert_close(kf["latent"], mvae.encode_image(vae, picture), atol=1e-6, rtol=0)

    module = mh.load_transformer(load_file(workspace.models_dir / FILES["transformer"]))
    shapes = [tuple(p.shape) for p in latent["samples"].unbind()]
    assert shapes == [(1, 24, 7, 4, 2), (1, 32, 2, 37)]
    keyframes = [mh.Keyframe(kf["latent"], kf["resolved_frame_index"]) for kf in pinned]
    conditions = {"keyframes": keyframes, "seed": 3, "text_tags": tags}
    ref_video, ref_audio, _ = diffusers_loop(module, shapes, 3, context, 2, conditions=conditions)
    video, audio = out["samples"].unbind()
    torch.testing.assert_close(video, ref_video, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, ref_audio, atol=1e-5, rtol=0)
    plain_video, _, _ = diffusers_loop(module, shapes, 3, context, 2)
    assert (video - plain_video).abs().max() > 1e-3  # the keyframes and tags do reach the model


def test_bad_first_last_frame_inputs_are_refused_by_name(workspace):
    from cluster.refs import ModelRef

    def node(**inputs):
        return asyncio.run(
            call_node("MiniMaxH3ImageToVideo", prompt="x", width=32, height=32, length=5, **{"vae": None, **inputs})
        )

    with pytest.raises(ValueError, match="first_frame: expected an IMAGE"):
        node(clip=None, first_frame=torch.zeros(1, 32, 32))
    with pytest.raises(ValueError, match="last_frame: expected an IMAGE"):
        node(clip=None, last_frame=torch.zeros(1, 32, 32, 1))
    sd1 = ModelRef("text_encoder", "sd1", ("clip_l.safetensors",), ("0",))
    with pytest.raises(ValueError, match="clip: MiniMax H3's first/last frames need its text encoder"):
        node(clip=sd1, first_frame=torch.zeros(1, 32, 32, 3))


def test_lora_merges_into_the_published_weights(workspace):
    """LoraLoaderModelOnly on MiniMax H3 (the templates' turbo LoRA switch): a LoRA in ComfyUI's key layout
    (diffusion_model.blocks.N.attn.qkv_proj.lora_A/B) merges into the file's fused qkv rows before diffusers'
    converter splits them: KSampler equals the loop over a transformer loaded from the file with
    W + strength * B @ A written in by hand. A LoRA in names no MiniMax H3 layer has is refused by name."""
    from safetensors.torch import load_file, save_file

    torch.set_num_threads(1)
    context = torch.randn(1, 4, TEXT_DIM, generator=torch.Generator().manual_seed(8))
    lora_name = FILES["lora"].split("/")[1]

    async def run(name: str):
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (model,) = await call_node("LoraLoaderModelOnly", model=model, lora_name=name, strength_model=0.7)
        (latent,) = await call_node("EmptyMiniMaxH3LatentAV", width=32, height=32, length=5)
        cond = [[context, {"pooled_output": None}]]
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=4,
            steps=1,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=cond,
            negative=cond,
            latent_image=latent,
            denoise=1.0,
        )
        return out["samples"].unbind()

    video, audio = asyncio.run(run(lora_name))
    sd = load_file(workspace.models_dir / FILES["transformer"])
    lora = load_file(workspace.models_dir / FILES["lora"])
    for key in [k for k in sd if k.endswith(".attn.qkv_proj.weight") and k.startswith("blocks.")]:
        stem = "diffusion_model." + key.removesuffix(".weight")
        sd[key] = sd[key] + 0.7 * lora[stem + ".lora_B.weight"] @ lora[stem + ".lora_A.weight"]
    shapes = [(1, 24, 2, 2, 2), (1, 32, 2, 8)]
    ref_video, ref_audio, _ = diffusers_loop(mh.load_transformer(sd), shapes, 4, context, 1)
    torch.testing.assert_close(video, ref_video, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, ref_audio, atol=1e-5, rtol=0)
    plain, _, _ = diffusers_loop(
        mh.load_transformer(load_file(workspace.models_dir / FILES["transformer"])), shapes, 4, context, 1
    )
    assert (video - plain).abs().max() > 1e-4  # the LoRA changed the model

    # the lightx2v release's diffusers/PEFT names: no MiniMax H3 layer of the published layout has them
    save_file(
        {
            "transformer_blocks.0.attn.to_q.lora_A.weight": torch.zeros(4, 64),
            "transformer_blocks.0.attn.to_q.lora_B.weight": torch.zeros(64, 4),
        },
        str(workspace.models_dir / "loras" / "peft_named.safetensors"),
    )
    with pytest.raises(Exception, match="peft_named.safetensors.*LoRA names match no known layout"):
        asyncio.run(run("peft_named.safetensors"))


def test_sigma_shift_reaches_the_schedule_and_the_model(workspace):
    """MiniMaxH3SigmaShift(5, 2): the sampler's schedule at shift 5 and every evaluation mapping its sigma with
    the video shift 5 and the audio shift 2 (ComfyUI hands both to the model)."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(5)
    context = torch.randn(1, 4, TEXT_DIM, generator=g)

    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (model,) = await call_node("MiniMaxH3SigmaShift", model=model, shift_video=5.0, shift_audio=2.0)
        (latent,) = await call_node("EmptyMiniMaxH3LatentAV", width=32, height=32, length=5)
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=9,
            steps=2,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=[[context, {"pooled_output": None}]],
            negative=[[context, {"pooled_output": None}]],
            latent_image=latent,
            denoise=1.0,
        )
        return out

    video, audio = asyncio.run(run())["samples"].unbind()

    from safetensors.torch import load_file

    module = mh.load_transformer(load_file(workspace.models_dir / FILES["transformer"]))
    shapes = [(1, 24, 2, 2, 2), (1, 32, 2, 8)]
    ref_video, ref_audio, ref_sigmas = diffusers_loop(module, shapes, 9, context, 2, shifts=(5.0, 2.0))
    ms = model_sampling_from_config({"kind": "flow", "shift": 5.0, "multiplier": 1000})
    torch.testing.assert_close(ksampler_sigmas(ms, "simple", 2).float(), ref_sigmas.float(), atol=1e-6, rtol=0)
    torch.testing.assert_close(video, ref_video, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, ref_audio, atol=1e-5, rtol=0)


def test_block_sparse_attention_is_dense_on_cpu(workspace):
    """ComfyUI runs every attention call dense off CUDA: the MODEL comes back unchanged; vsa needs MiniMax H3."""
    from cluster.refs import ModelRef

    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (patched,) = await call_node(
            "BlockSparseAttention",
            model=model,
            selection="sol-attn",
            start_percent=0.2,
            end_percent=1.0,
            **{"selection.tau": 1.3},
        )
        (vsa,) = await call_node(
            "BlockSparseAttention",
            model=model,
            selection="vsa",
            start_percent=0.0,
            end_percent=1.0,
            **{"selection.keep_percent": 10.0},
        )
        return model, patched, vsa

    model, patched, vsa = asyncio.run(run())
    assert patched == model and vsa == model
    other = ModelRef("diffusion_model", "sd1", ("x.safetensors",), ("0",))
    with pytest.raises(ValueError, match="VSA selection needs a MiniMax-H3 model"):
        asyncio.run(call_node("BlockSparseAttention", model=other, selection="vsa", start_percent=0.0, end_percent=1.0))


def test_noise_mask_on_the_av_latent_is_refused_by_name(workspace):
    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (latent,) = await call_node("EmptyMiniMaxH3LatentAV", width=32, height=32, length=5)
        context = torch.zeros(1, 4, TEXT_DIM)
        await call_node(
            "KSampler",
            model=model,
            seed=1,
            steps=1,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=[[context, {"pooled_output": None}]],
            negative=[[context, {"pooled_output": None}]],
            latent_image={**latent, "noise_mask": torch.ones(1, 32, 32)},
            denoise=1.0,
        )

    with pytest.raises(ValueError, match="noise mask on a MiniMax H3 audio-video latent"):
        asyncio.run(run())


def test_reference_to_video_chain(workspace):
    """MiniMaxH3ReferenceToVideo (ref2va) with two reference images and a text-encoder-only one, as ComfyUI's node:
    each scaled down only, aspect kept, sides rounded to 32, to the canvas's area (`match`: 48x40 stays, to 64x32;
    64x96 shrinks to 32x64; 32x32 is kept, Lanczos-resampled all the same), read by the text encoder before the prompt as <Picture 1..3> with the rows' tags, and
    the first two VAE-encoded into one latent frame each (minimax_refs). KSampler's video and audio equal diffusers'
    loop over its transformer with those reference rows (noised from the sampling seed) and tagged prompt rows."""
    from cluster.refs import ModelRef
    from nodes.models.minimax_h3_text import load_text_encoder
    from nodes.upscale import common_upscale

    torch.set_num_threads(1)
    prompt = "<Picture 1> rides <Picture 2> past <Picture 3>.\nAudio: wind."
    g = torch.Generator().manual_seed(8)
    first, second, third = (torch.rand(1, h, w, 3, generator=g) for h, w in ((40, 48), (96, 64), (32, 32)))

    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (clip,) = await call_node(
            "CLIPLoader", clip_name=FILES["text_encoder"].split("/")[1], type="minimax", device="default"
        )
        (vae,) = await call_node("VAELoader", vae_name=FILES["vae"].split("/")[1])
        positive, latent = await call_node(
            "MiniMaxH3ReferenceToVideo",
            clip=clip,
            vae=vae,
            prompt=prompt,
            width=32,
            height=64,
            length=5,
            ref_image_size="match",
            **{"ref_images.ref_image_0": first, "ref_images.ref_image_1": second},
            **{"ref_images.ref_image_2": {"image": third}},
        )
        (negative,) = await call_node("CLIPTextEncode", clip=clip, text="")
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=5,
            steps=2,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=positive,
            negative=negative,
            latent_image=latent,
            denoise=1.0,
        )
        return positive, latent, out

    positive, latent, out = asyncio.run(run())
    from safetensors.torch import load_file

    pictures = [
        common_upscale(image.movedim(-1, 1), w, h, "lanczos", "disabled").movedim(1, -1)
        for image, (w, h) in ((first, (64, 32)), (second, (32, 64)), (third, (32, 32)))
    ]
    encoder = load_text_encoder(
        ModelRef("text_encoder", "minimax_h3", ("te.safetensors",), ("0",)),
        load_file(workspace.models_dir / FILES["text_encoder"]),
    )
    tokens = encoder.tokenize(prompt, images=3)
    context, opts = positive[0]
    torch.testing.assert_close(context, encoder.encode(tokens, pictures)[0], atol=1e-6, rtol=0)
    tags = encoder.row_tags(tokens, pictures)
    assert torch.equal(opts["minimax_token_tags"], tags) and (tags == 0).any()
    vae = mvae.load_vae(load_file(workspace.models_dir / FILES["vae"]))
    refs = opts["minimax_refs"]
    assert [r["kind"] for r in refs] == ["image", "image"] and "minimax_keyframes" not in opts
    for ref, picture in zip(refs, pictures[:2], strict=True):
        torch.testing.assert_close(ref["latent"], mvae.encode_image(vae, picture), atol=1e-6, rtol=0)
    assert [tuple(r["latent"].shape[-2:]) for r in refs] == [(2, 4), (4, 2)]

    module = mh.load_transformer(load_file(workspace.models_dir / FILES["transformer"]))
    shapes = [tuple(p.shape) for p in latent["samples"].unbind()]
    conditions = {"refs": [r["latent"] for r in refs], "seed": 5, "text_tags": tags}
    ref_video, ref_audio, _ = diffusers_loop(module, shapes, 5, context, 2, conditions=conditions)
    video, audio = out["samples"].unbind()
    torch.testing.assert_close(video, ref_video, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, ref_audio, atol=1e-5, rtol=0)
    plain_video, _, _ = diffusers_loop(module, shapes, 5, context, 2, conditions={"text_tags": tags})
    assert (video - plain_video).abs().max() > 1e-3  # the reference rows do reach the model


def test_reference_sizes_and_bad_reference_inputs(workspace):
    from nodes.library.minimax_h3_refs import reference_size

    assert reference_size(48, 40, 32, 64, "match") == (64, 32)
    assert reference_size(64, 96, 32, 64, "match") == (32, 64)
    assert reference_size(4096, 3072, 1344, 768, "max") == (2720, 2048)  # 2048 px short edge
    assert reference_size(300, 200, 1344, 768, "max") == (288, 192)  # never upscaled

    def node(**inputs):
        base = {"clip": None, "prompt": "x", "width": 32, "height": 32, "length": 5}
        return asyncio.run(call_node("MiniMaxH3ReferenceToVideo", **{**base, **inputs}))

    with pytest.raises(ValueError, match="ref_videos: MiniMax H3 reference videos and audio are not supported"):
        node(**{"ref_videos.ref_video_0": torch.zeros(5, 32, 32, 3)})
    with pytest.raises(ValueError, match="ref_image_0: expected an IMAGE"):
        node(**{"ref_images.ref_image_0": torch.zeros(32, 32, 3)})
    with pytest.raises(ValueError, match="ref_image_size: expected 'match' or 'max'"):
        node(ref_image_size="big", **{"ref_images.ref_image_0": torch.zeros(1, 32, 32, 3)})


def test_add_guide_pins_an_image_beside_the_references(workspace):
    """MiniMaxH3AddGuide (as ComfyUI's, image guides): the picture cover-cropped to the latent's canvas, VAE-encoded
    into one frame and appended to minimax_keyframes at frame_idx (negative from the end); with a reference image
    in the same conditioning the transformer packs [text | keyframe | reference | audio | video] (ComfyUI's
    PackedLayout: keyframe times after the references' units) and KSampler equals diffusers' loop so conditioned."""
    from safetensors.torch import load_file

    from nodes.upscale import common_upscale

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(9)
    ref, guide = torch.rand(1, 32, 32, 3, generator=g), torch.rand(2, 48, 24, 3, generator=g)

    async def run():
        (model,) = await call_node("UNETLoader", unet_name=FILES["transformer"].split("/")[1], weight_dtype="default")
        (clip,) = await call_node(
            "CLIPLoader", clip_name=FILES["text_encoder"].split("/")[1], type="minimax", device="default"
        )
        (vae,) = await call_node("VAELoader", vae_name=FILES["vae"].split("/")[1])
        positive, latent = await call_node(
            "MiniMaxH3ReferenceToVideo",
            clip=clip,
            vae=vae,
            prompt="<Picture 1> waves.",
            width=32,
            height=64,
            length=22,
            **{"ref_images.ref_image_0": ref},
        )
        (guided,) = await call_node(
            "MiniMaxH3AddGuide", positive=positive, latent=latent, frame_idx=-1, vae=vae, image=guide
        )
        (negative,) = await call_node("CLIPTextEncode", clip=clip, text="")
        (out,) = await call_node(
            "KSampler",
            model=model,
            seed=4,
            steps=2,
            cfg=1.0,
            sampler_name="euler",
            scheduler="simple",
            positive=guided,
            negative=negative,
            latent_image=latent,
            denoise=1.0,
        )
        return positive, guided, latent, out

    positive, guided, latent, out = asyncio.run(run())
    context, opts = guided[0]
    assert "minimax_keyframes" not in positive[0][1] and len(opts["minimax_refs"]) == 1
    (kf,) = opts["minimax_keyframes"]
    assert kf["resolved_frame_index"] == 21  # the last of 22 frames
    picture = common_upscale(guide[:1].movedim(-1, 1), 32, 64, "lanczos", "center").movedim(1, -1)
    vae = mvae.load_vae(load_file(workspace.models_dir / FILES["vae"]))
    torch.testing.assert_close(kf["latent"], mvae.encode_image(vae, picture), atol=1e-6, rtol=0)

    layout = mh.t2va_layout(5, 7, 4, 2, 37, keyframe_frames=(21,), ref_grids=((2, 2),))
    assert layout.position_ids[5:7, 0].tolist() == [6 + 35.0] * 2  # keyframe rows: after the one reference unit
    assert layout.position_ids[7, 0].item() == 5.0 and layout.position_ids[8, 0].item() == 6.0  # ref, then audio

    module = mh.load_transformer(load_file(workspace.models_dir / FILES["transformer"]))
    shapes = [tuple(p.shape) for p in latent["samples"].unbind()]
    conditions = {
        "keyframes": [mh.Keyframe(kf["latent"], 21)],
        "refs": [opts["minimax_refs"][0]["latent"]],
        "seed": 4,
        "text_tags": opts["minimax_token_tags"],
    }
    ref_video, ref_audio, _ = diffusers_loop(module, shapes, 4, context, 2, conditions=conditions)
    video, audio = out["samples"].unbind()
    torch.testing.assert_close(video, ref_video, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio, ref_audio, atol=1e-5, rtol=0)

    def node(**inputs):
        return asyncio.run(call_node("MiniMaxH3AddGuide", positive=positive, latent=latent, **{"vae": None, **inputs}))

    with pytest.raises(ValueError, match="frame_idx: 22 is outside the video's 22 frames"):
        node(frame_idx=22, vae=object(), image=guide)
    with pytest.raises(ValueError, match="audio: MiniMax H3 audio guides are not supported yet"):
        node(frame_idx=0, audio={"waveform": torch.zeros(1, 2, 100), "sample_rate": 32000})
    with pytest.raises(ValueError, match="image: MiniMax H3 guide clips"):
        node(frame_idx=0, image=torch.zeros(5, 32, 32, 3))
    with pytest.raises(ValueError, match="latent: MiniMaxH3AddGuide expects a MiniMax H3 AV latent"):
        asyncio.run(
            call_node("MiniMaxH3AddGuide", positive=positive, latent={"samples": torch.zeros(1, 4, 8, 8)}, frame_idx=0)
        )
