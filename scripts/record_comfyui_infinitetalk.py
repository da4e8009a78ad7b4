"""Record what ComfyUI 0.10.0's InfiniteTalk code (comfy/ldm/wan/model_multitalk.py) computes on the tiny InfiniteTalk
patch (nodes/models/wan_infinitetalk_demo.py: model_patches/wan2.1_infiniteTalk_tiny.safetensors), as
tests/models/test_wan_multitalk.py checks (tests/models/fixtures/comfyui_infinitetalk.json.xz).

ComfyUI builds the patch with the released file's fixed sizes (40 blocks, 40 heads, wav2vec2-base's 12 x 768
features); the recorder builds the same classes at the tiny file's sizes (2 blocks, 2 heads of 128, 24 x 64
features; a seeded 2-head 256-wide attention for the rotary case) and loads the file. Recorded on seeded inputs:
project_audio_features for one speaker and for two laid end to end (frames past the audio, an offset window), the
audio cross-attention of block 1 for one speaker, get_attn_map_with_target's speaker maps and the two-speaker rotary
attention; the two-head tiny Wan 2.1 i2v file's raw output (no patch, one speaker, two speakers);
WanInfiniteTalkToVideo's outputs for two speakers and for an extension; two euler steps of SamplerCustomAdvanced on
its MODEL for both (the file loaded by ComfyUI's UNETLoader path with record_comfyui_wan's tiny widths, so
<models dir> is a demo-models workspace's models folder); its object_info. Run inside ComfyUI 0.10.0's environment:

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:/work/main/scripts:. OMP_NUM_THREADS=1 <venv>/bin/python \\
        /work/main/scripts/record_comfyui_infinitetalk.py <out .json.xz> <models dir>
"""

from __future__ import annotations

import sys

import torch
from comfyui_recording import b64, comfyui_on_cpu, run_node, sha256, write_json

OUT, MODELS = sys.argv[1:3]
sys.argv[1:] = [OUT, MODELS, MODELS, OUT, OUT]  # record_comfyui_wan reads its own arguments on import
import record_comfyui_wan  # noqa: E402  (ComfyUI's modules; the tiny widths for loading the tiny Wan files)

comfyui_on_cpu()

import comfy.ldm.modules.attention as attention  # noqa: E402
import comfy.ldm.wan.model as wan  # noqa: E402
import comfy.ldm.wan.model_multitalk as mt  # noqa: E402
import comfy.model_patcher  # noqa: E402
import comfy.ops  # noqa: E402
import comfy.sd  # noqa: E402
import comfy.utils  # noqa: E402
from comfy_extras.nodes_model_patch import MultiTalkModelPatch  # noqa: E402
from comfy_extras.nodes_wan import WanInfiniteTalkToVideo  # noqa: E402

mt.optimized_attention = attention.attention_pytorch
wan.optimized_attention = attention.attention_pytorch
FILE = "model_patches/wan2.1_infiniteTalk_tiny.safetensors"
VAE_FILE = "vae/wan_2.1_vae_tiny.safetensors"
WAN_FILE = "diffusion_models/wan2.1_i2v_480p_14B_2heads_tiny.safetensors"
DIM, HEADS = 256, 2  # the tiny files'
LAYERS, WIDTH = 24, 64  # the tiny wav2vec 2.0's


def seeded_params(module: torch.nn.Module, seed: int) -> None:
    """Weights from a seeded generator in sorted name order (the test fills its module the same way)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _name, p in sorted(module.named_parameters()):
            p.copy_(torch.randn(p.shape, generator=gen) / (p.shape[-1] ** 0.5 if p.dim() == 2 else 3.0))


def tiny_patch() -> torch.nn.Module:
    sd = comfy.utils.load_torch_file(f"{MODELS}/{FILE}")
    ops = comfy.ops.manual_cast
    patch = MultiTalkModelPatch(
        in_dim=DIM, intermediate_dim=32, out_dim=16, context_tokens=32, num_layers=2, operations=ops
    )
    patch.audio_proj = mt.MultiTalkAudioProjModel(
        seq_len=5,
        seq_len_vf=8,
        blocks=LAYERS,
        channels=WIDTH,
        intermediate_dim=32,
        out_dim=16,
        context_tokens=32,
        operations=ops,
    )
    for block in patch.blocks:  # 128-wide heads at the tiny width (ComfyUI fixes 40)
        attn = block.audio_cross_attn
        attn.num_heads, attn.head_dim = HEADS, 128
        attn.rope_1d = mt.RotaryPositionalEmbedding1D(128)
    patch.load_state_dict(sd)
    return patch.float().eval()


def tiny_wan() -> torch.nn.Module:
    """ComfyUI's WanModel (i2v) at the tiny file's sizes, its bfloat16 weights in float32 as ComfyUI runs on a CPU."""
    sd = {k: v.float() for k, v in comfy.utils.load_torch_file(f"{MODELS}/{WAN_FILE}").items()}
    settings = {"operations": comfy.ops.disable_weight_init, "dtype": torch.float32}
    model = wan.WanModel(
        model_type="i2v",
        in_dim=36,
        dim=DIM,
        ffn_dim=256,
        text_dim=32,
        out_dim=16,
        num_heads=HEADS,
        num_layers=2,
        operations=comfy.ops.disable_weight_init,
        dtype=torch.float32,
    )
    model.img_emb = wan.MLPProj(sd["img_emb.proj.0.weight"].shape[0], DIM, operation_settings=settings)
    model.load_state_dict(sd, strict=True)
    return model.eval()


def record_forward(patch: torch.nn.Module, out: dict) -> None:
    """The tiny Wan 2.1 i2v model's raw output without the patch, with InfiniteTalk's audio cross-attention in its
    blocks for one speaker (scale 0.8), and for two speakers end to end with their masks (scale 1.3, the speaker
    maps from each block's self-attention); no CLIP vision features, as the template; 3 latent frames of 6 x 9."""
    model = tiny_wan()
    gen = torch.Generator().manual_seed(41)
    x = torch.randn(1, 36, 3, 6, 9, generator=gen)
    context = torch.randn(1, 512, 32, generator=gen)
    speaker = torch.randn(20, LAYERS, WIDTH, generator=gen)
    t = torch.tensor([640.0])
    audio = mt.project_audio_features(patch.audio_proj, [speaker], 0, 9)
    options = {
        "patches": {"attn2_patch": [mt.MultiTalkCrossAttnPatch(type("P", (), {"model": patch})(), 0.8)]},
        "audio_embeds": audio,
    }
    out["forward_plain"] = b64(model(x, t, context))
    out["forward_audio"] = b64(model(x, t, context, transformer_options=options))
    other = torch.randn(14, LAYERS, WIDTH, generator=gen)
    full1, full2 = torch.zeros(34, LAYERS, WIDTH), torch.zeros(34, LAYERS, WIDTH)
    full1[:20], full2[20:] = speaker, other
    audio = mt.project_audio_features(patch.audio_proj, [full1, full2], 0, 9)
    masks = torch.zeros(2, 3 * 5, dtype=torch.bool)  # the 3 x 5 token grid of a frame: left and right
    masks[0].view(3, 5)[:, :2], masks[1].view(3, 5)[:, 3:] = True, True
    options = {
        "patches": {
            "attn1_patch": [mt.MultiTalkGetAttnMapPatch(masks)],
            "attn2_patch": [mt.MultiTalkCrossAttnPatch(type("P", (), {"model": patch})(), 1.3)],
        },
        "audio_embeds": audio,
    }
    out["forward_two"] = b64(model(x, t, context, transformer_options=options))


def encoder_output(gen: torch.Generator, frames: int) -> dict:
    """A seeded AUDIO_ENCODER_OUTPUT of the tiny encoder's 25 hidden states at 50 frames a second."""
    layers = tuple(torch.randn(1, frames, WIDTH, generator=gen) for _ in range(LAYERS + 1))
    return {"encoded_audio": layers[-1], "encoded_audio_all_layers": layers, "audio_samples": frames * 320}


def record_node(patch: torch.nn.Module) -> dict:
    """WanInfiniteTalkToVideo's outputs (the model's audio embeds, motion latent and token masks, the conds, the
    trim) for two speakers with a two-image start (64 x 48 from 56 x 40) and for one speaker extending 12 previous
    frames by their last 5, on the tiny Wan 2.1 VAE."""
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{MODELS}/{VAE_FILE}"))
    model = comfy.model_patcher.ModelPatcher(torch.nn.Linear(1, 1), torch.device("cpu"), torch.device("cpu"))
    wrapped = type("P", (), {"model": patch})()
    gen = torch.Generator().manual_seed(43)
    cond = [[torch.randn(1, 4, 32, generator=gen), {}]]
    out1, out2 = encoder_output(gen, 30), encoder_output(gen, 24)
    start = torch.rand(2, 40, 56, 3, generator=gen)
    previous = torch.rand(12, 40, 56, 3, generator=gen)
    mask_1 = (torch.rand(1, 40, 56, generator=gen) > 0.6).float()
    mask_2 = (torch.rand(1, 40, 56, generator=gen) > 0.6).float()
    cases = {
        "two": dict(
            mode={"mode": "two_speakers", "audio_encoder_output_2": out2, "mask_1": mask_1, "mask_2": mask_2},
            length=9,
            motion_frame_count=9,
            audio_scale=1.0,
            start_image=start,
        ),
        "extend": dict(
            mode={"mode": "single_speaker"},
            length=13,
            motion_frame_count=5,
            audio_scale=0.7,
            start_image=start,
            previous_frames=previous,
        ),
    }
    rec = {}
    for name, kwargs in cases.items():
        m, pos, neg, latent, trim = WanInfiniteTalkToVideo.execute(
            model=model,
            model_patch=wrapped,
            positive=cond,
            negative=cond,
            vae=vae,
            width=64,
            height=48,
            audio_encoder_output_1=out1,
            **kwargs,
        )
        opts = m.model_options["transformer_options"]
        (outer,) = m.wrappers["outer_sample"]["infinite_talk_outer_sample"]
        entry = {
            "audio_embeds": b64(opts["audio_embeds"]),
            "motion": b64(outer.motion_frames_latent),
            "extend": outer.is_extend,
            "concat_latent_image": b64(pos[0][1]["concat_latent_image"]),
            "concat_mask": b64(pos[0][1]["concat_mask"]),
            "latent_shape": list(latent["samples"].shape),
            "trim": trim,
        }
        maps = [p for p in opts["patches"].get("attn1_patch", [])]
        if maps:
            entry["token_masks"] = b64(maps[0].ref_target_masks.float())
        rec[name] = entry
    return rec


def record_sampling(patch: torch.nn.Module) -> dict:
    """Two euler steps (normal schedule, cfg 1, the negative zeroed as the template does) of the two-head tiny Wan
    2.1 i2v file loaded by ComfyUI's UNETLoader path, patched by WanInfiniteTalkToVideo: two speakers from a start
    image, and one speaker extending 12 previous frames by their last 5 (the motion latent over the input's first
    frames in every evaluation, spliced in front of the sampled latent); seeded text states. The output latents."""
    from comfy_extras import nodes_custom_sampler as cs

    import nodes as comfy_nodes

    record_comfyui_wan.tiny_widths()
    model = comfy.sd.load_diffusion_model(f"{MODELS}/{WAN_FILE}")
    vae = comfy.sd.VAE(sd=comfy.utils.load_torch_file(f"{MODELS}/{VAE_FILE}"))
    patcher = comfy.model_patcher.ModelPatcher(patch, torch.device("cpu"), torch.device("cpu"))
    gen = torch.Generator().manual_seed(47)
    cond = [[torch.randn(1, 512, 32, generator=gen), {}]]
    (negative,) = run_node(comfy_nodes.ConditioningZeroOut, {"conditioning": cond})
    out1, out2 = encoder_output(gen, 30), encoder_output(gen, 24)
    start = torch.rand(1, 48, 64, 3, generator=gen)
    previous = torch.rand(12, 48, 64, 3, generator=gen)
    mask_1 = (torch.rand(1, 48, 64, generator=gen) > 0.5).float()
    mask_2 = 1.0 - mask_1
    cases = {
        "two": (
            5,
            {"mode": {"mode": "two_speakers", "audio_encoder_output_2": out2, "mask_1": mask_1, "mask_2": mask_2}},
        ),
        "extend": (6, {"mode": {"mode": "single_speaker"}, "previous_frames": previous, "motion_frame_count": 5}),
    }
    rec = {}
    for name, (seed, kwargs) in cases.items():
        args = {"motion_frame_count": 9, "audio_scale": 1.0, **kwargs}
        m, pos, neg, latent, _ = WanInfiniteTalkToVideo.execute(
            model=model,
            model_patch=patcher,
            positive=cond,
            negative=negative,
            vae=vae,
            width=64,
            height=48,
            length=9,
            audio_encoder_output_1=out1,
            start_image=start,
            **args,
        )
        (noise,) = run_node(cs.RandomNoise, {"noise_seed": seed})
        (sampler,) = run_node(cs.KSamplerSelect, {"sampler_name": "euler"})
        (sigmas,) = run_node(cs.BasicScheduler, {"model": m, "scheduler": "normal", "steps": 2, "denoise": 1.0})
        (guider,) = run_node(cs.CFGGuider, {"model": m, "positive": pos, "negative": neg, "cfg": 1.0})
        out, _ = run_node(
            cs.SamplerCustomAdvanced,
            {"noise": noise, "guider": guider, "sampler": sampler, "sigmas": sigmas, "latent_image": latent},
        )
        rec[name] = {"seed": seed, "samples": b64(out["samples"])}
    return rec


def main() -> None:
    patch = tiny_patch()
    gen = torch.Generator().manual_seed(39)
    speaker1 = torch.randn(30, LAYERS, WIDTH, generator=gen)
    speaker2 = torch.randn(22, LAYERS, WIDTH, generator=gen)
    out: dict = {"sha256": {name: sha256(f"{MODELS}/{name}") for name in (FILE, WAN_FILE)}}
    # the seeded inputs are drawn again by the test, in the same order
    with torch.no_grad():
        one = mt.project_audio_features(patch.audio_proj, [speaker1], 0, 21)
        out["project_one"] = b64(one)
        total = 52
        full1, full2 = torch.zeros(total, LAYERS, WIDTH), torch.zeros(total, LAYERS, WIDTH)
        full1[:30], full2[30:] = speaker1, speaker2
        out["project_two"] = b64(mt.project_audio_features(patch.audio_proj, [full1, full2], 40, 65))
        # block 1's audio cross-attention, one speaker: 6 latent frames of a 3 x 4 token grid
        x = torch.randn(1, 6 * 12, DIM, generator=gen)
        audio = mt.project_audio_features(patch.audio_proj, [speaker1], 0, 21)  # [1, 6, 32, 16]
        block = patch.blocks[1]
        out["single"] = b64(block.audio_cross_attn(block.norm_x(x), audio, shape=(6, 3, 4)))
        # two speakers: maps from seeded self-attention q/k (4 heads), then a 2-head attention at 256 wide
        q = torch.randn(1, 3 * 12, 4, 32, generator=gen)
        k = torch.randn(1, 3 * 12, 4, 32, generator=gen)
        masks = torch.zeros(2, 12, dtype=torch.bool)
        masks[0, :5], masks[1, 6:] = True, True
        maps = mt.get_attn_map_with_target(q, k, (3, 3, 4), ref_target_masks=masks)
        out["maps"] = b64(maps)
        multi = mt.SingleStreamMultiAttention(256, 16, num_heads=2, qkv_bias=True, operations=comfy.ops.manual_cast)
        seeded_params(multi, 7)
        x2 = torch.randn(1, 3 * 12, 256, generator=gen)
        audio2 = torch.randn(1, 3, 64, 16, generator=gen)
        out["two"] = b64(multi(x2, audio2, shape=(3, 3, 4), x_ref_attn_map=maps))
        record_forward(patch, out)
        out["node"] = record_node(patch)
        out["sampling"] = record_sampling(patch)
    out["object_info"] = {
        "WanInfiniteTalkToVideo": {
            **WanInfiniteTalkToVideo.GET_NODE_INFO_V1(),
            "python_module": "comfy_extras.nodes_wan",
        }
    }
    write_json(OUT, out)


if __name__ == "__main__":
    main()
