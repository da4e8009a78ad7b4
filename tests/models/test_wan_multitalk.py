"""InfiniteTalk's audio patch (nodes.models.wan_multitalk) against ComfyUI 0.10.0's model_multitalk code on the tiny
patch file (scripts/record_comfyui_infinitetalk.py, fixtures/comfyui_infinitetalk.json.xz): the audio projection for
one speaker and for two laid end to end, one block's audio cross-attention, the two speakers' token maps and their
rotary attention. The seeded inputs are drawn here in the recorder's order."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from nodes.models.model_patch import build_model_patch, patch_kind
from nodes.models.wan_infinitetalk_demo import infinitetalk_patch
from nodes.models.wan_multitalk import AudioCrossAttention, audio_attention, audio_tokens, audio_windows, speaker_maps
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_infinitetalk.json"
LAYERS, WIDTH = 24, 64
TOL = 1e-5


@pytest.fixture(scope="module")
def rec() -> dict:
    return load_json(FIXTURE)


@pytest.fixture(scope="module")
def patch() -> torch.nn.Module:
    sd = infinitetalk_patch()
    assert patch_kind(sd) == "wan_multitalk"
    return build_model_patch(sd).eval()


def _inputs() -> dict:
    gen = torch.Generator().manual_seed(39)
    out = {"speaker1": torch.randn(30, LAYERS, WIDTH, generator=gen)}
    out["speaker2"] = torch.randn(22, LAYERS, WIDTH, generator=gen)
    out["x"] = torch.randn(1, 6 * 12, 256, generator=gen)
    out["q"] = torch.randn(1, 3 * 12, 4, 32, generator=gen)
    out["k"] = torch.randn(1, 3 * 12, 4, 32, generator=gen)
    out["x2"] = torch.randn(1, 3 * 12, 256, generator=gen)
    out["audio2"] = torch.randn(1, 3, 64, 16, generator=gen)
    return out


def _close(ours: torch.Tensor, entry: dict) -> None:
    ref = tensor(entry)
    got = at_recorded(ours.detach().float(), entry)
    assert torch.isfinite(ref).all()
    assert (got - ref).abs().max().item() <= TOL * max(1.0, ref.abs().max().item())


def test_audio_projection_matches_comfyui(rec: dict, patch: torch.nn.Module) -> None:
    s = _inputs()
    with torch.no_grad():
        one = audio_tokens(patch, *audio_windows([s["speaker1"]], 0, 21))
        _close(one.unsqueeze(0), rec["project_one"])
        full1, full2 = torch.zeros(52, LAYERS, WIDTH), torch.zeros(52, LAYERS, WIDTH)
        full1[:30], full2[30:] = s["speaker1"], s["speaker2"]
        # frames 40..64 run past the 52 audio frames: padded with the first
        two = audio_tokens(patch, *audio_windows([full1, full2], 40, 65))
        _close(two.unsqueeze(0), rec["project_two"])


def test_single_speaker_attention_matches_comfyui(rec: dict, patch: torch.nn.Module) -> None:
    s = _inputs()
    block = patch.blocks[1]
    with torch.no_grad():
        audio = audio_tokens(patch, *audio_windows([s["speaker1"]], 0, 21))
        out = audio_attention(block.audio_cross_attn, block.norm_x(s["x"]), audio, (6, 3, 4), None)
    _close(out, rec["single"])


def test_two_speakers_maps_and_attention_match_comfyui(rec: dict) -> None:
    s = _inputs()
    masks = torch.zeros(2, 12, dtype=torch.bool)
    masks[0, :5], masks[1, 6:] = True, True
    maps = speaker_maps(s["q"], s["k"], 12, masks)
    _close(maps, rec["maps"])
    attn = AudioCrossAttention(256, 16, 2)
    gen = torch.Generator().manual_seed(7)  # the recorder's seeded weights, in sorted name order
    with torch.no_grad():
        for _, p in sorted(attn.named_parameters()):
            p.copy_(torch.randn(p.shape, generator=gen) / (p.shape[-1] ** 0.5 if p.dim() == 2 else 3.0))
        out = audio_attention(attn, s["x2"], s["audio2"][0], (3, 3, 4), tensor(rec["maps"]))
    _close(out, rec["two"])


def test_one_head_refuses_two_speakers() -> None:
    q = torch.zeros(1, 12, 1, 8)
    with pytest.raises(ValueError, match="two attention heads"):
        speaker_maps(q, q, 12, torch.ones(2, 12, dtype=torch.bool))


@pytest.fixture(scope="module")
def wan_i2v(tmp_path_factory, rec: dict):
    """The two-head tiny Wan 2.1 image-to-video file, written by its builder (the bytes the recorder read)."""
    from nodes.loaders import make_ref
    from nodes.models import loader
    from nodes.models.wan_infinitetalk_demo import FILES, build_demo_wan_infinitetalk

    root = tmp_path_factory.mktemp("itk")
    build_demo_wan_infinitetalk(root)
    for name in (FILES["patch"], FILES["wan"]):
        digest = hashlib.sha256((root / name).read_bytes()).hexdigest()
        assert digest == rec["sha256"][name], f"{name} changed: re-record"
    return loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [str(root / FILES["wan"])]))


def test_patched_wan_forward_matches_comfyui(rec: dict, patch: torch.nn.Module, wan_i2v) -> None:
    """The audio cross-attention inside the Wan blocks (nodes.modelfns.infinitetalk's hooks): one speaker at scale
    0.8, then two end to end with left / right masks at 1.3 (the maps from each block's self-attention); no CLIP
    vision features (ComfyUI's image attention then reads the text states, as here since this change)."""
    from nodes.modelfns.infinitetalk import with_audio

    gen = torch.Generator().manual_seed(41)
    x = torch.randn(1, 36, 3, 6, 9, generator=gen)
    context = torch.randn(1, 512, 32, generator=gen)
    speaker = torch.randn(20, LAYERS, WIDTH, generator=gen)
    other = torch.randn(14, LAYERS, WIDTH, generator=gen)
    t = torch.tensor([640.0])
    cond = {"context": context, "concat": x[:, 16:]}

    def run(tokens: torch.Tensor, scale: float, masks: torch.Tensor | None) -> torch.Tensor:
        forward = with_audio(lambda v: wan_i2v.apply(v, t, cond), wan_i2v.module, patch, tokens, scale, masks)
        return forward(x[:, :16])

    with torch.no_grad():
        plain = wan_i2v.apply(x[:, :16], t, cond)
        _close(plain, rec["forward_plain"])
        one = run(audio_tokens(patch, *audio_windows([speaker], 0, 9)), 0.8, None)
        _close(one, rec["forward_audio"])
        full1, full2 = torch.zeros(34, LAYERS, WIDTH), torch.zeros(34, LAYERS, WIDTH)
        full1[:20], full2[20:] = speaker, other
        masks = torch.zeros(2, 3 * 5, dtype=torch.bool)
        masks[0].view(3, 5)[:, :2], masks[1].view(3, 5)[:, 3:] = True, True
        two = run(audio_tokens(patch, *audio_windows([full1, full2], 0, 9)), 1.3, masks)
        _close(two, rec["forward_two"])
    assert (one - plain).abs().max() > 1e-2 and (two - one).abs().max() > 1e-2  # the audio acts


@pytest.fixture(scope="module")
def node_workspace(tmp_path_factory):
    from nodes.models.wan_demo import build_demo_wan
    from nodes.models.wan_infinitetalk_demo import build_demo_wan_infinitetalk
    from tests.node_calls import active_workspace

    yield from active_workspace(tmp_path_factory.mktemp("itk-ws"), build_demo_wan, build_demo_wan_infinitetalk)


def _encoder_output(gen: torch.Generator, frames: int) -> dict:
    layers = tuple(torch.randn(1, frames, WIDTH, generator=gen) for _ in range(LAYERS + 1))
    return {"encoded_audio": layers[-1], "encoded_audio_all_layers": layers, "audio_samples": frames * 320}


@pytest.mark.parametrize("case", ["two", "extend"])
def test_node_conditions_as_comfyui(rec: dict, patch: torch.nn.Module, node_workspace, case: str) -> None:
    """WanInfiniteTalkToVideo: two speakers with a two-image start (64 x 48 from 56 x 40), and one speaker extending
    12 previous frames by their last 5 (audio from frame 7, trim 5): the audio ComfyUI's node projects, the motion
    latent of its outer-sample wrapper, the speakers' token masks, the concat latent and mask, the latent, the trim."""
    import asyncio

    from nodes.infinitetalk import OPTION
    from nodes.library.wan_infinitetalk import WanInfiniteTalkToVideo
    from nodes.loaders import make_ref
    from nodes.models.wan_demo import FILES as WAN_FILES
    from nodes.models.wan_infinitetalk_demo import FILES

    models = node_workspace.models_dir
    gen = torch.Generator().manual_seed(43)  # the recorder's draws, in its order
    cond = [[torch.randn(1, 4, 32, generator=gen), {}]]
    out1, out2 = _encoder_output(gen, 30), _encoder_output(gen, 24)
    start = torch.rand(2, 40, 56, 3, generator=gen)
    previous = torch.rand(12, 40, 56, 3, generator=gen)
    mask_1 = (torch.rand(1, 40, 56, generator=gen) > 0.6).float()
    mask_2 = (torch.rand(1, 40, 56, generator=gen) > 0.6).float()
    if case == "two":
        kwargs = {"mode": "two_speakers", "length": 9, "motion_frame_count": 9, "audio_scale": 1.0}
        kwargs.update({"mode.audio_encoder_output_2": out2, "mode.mask_1": mask_1, "mode.mask_2": mask_2})
    else:
        kwargs = {"mode": "single_speaker", "length": 13, "motion_frame_count": 5, "audio_scale": 0.7}
        kwargs["previous_frames"] = previous
    model = make_ref("diffusion_model", "wan21", [models / FILES["wan"]])
    patch_ref = make_ref("model_patch", "wan_multitalk", [models / FILES["patch"]])
    vae = make_ref("vae", "qwen_image", [models / WAN_FILES["vae"]])
    node = WanInfiniteTalkToVideo().execute(
        model=model,
        model_patch=patch_ref,
        positive=cond,
        negative=cond,
        vae=vae,
        width=64,
        height=48,
        audio_encoder_output_1=out1,
        start_image=start,
        **kwargs,
    )
    patched, positive, negative, latent, trim = asyncio.run(node)
    r = rec["node"][case]
    entry = patched.option(OPTION)
    with torch.no_grad():
        _close(audio_tokens(patch, entry.first, entry.later).unsqueeze(0), r["audio_embeds"])
    _close(entry.motion, r["motion"])
    assert entry.extend == r["extend"] and trim == r["trim"] and entry.scale == kwargs["audio_scale"]
    if "token_masks" in r:
        assert torch.equal(entry.masks.float(), tensor(r["token_masks"]))
    else:
        assert entry.masks is None
    for side in (positive, negative):
        _close(side[0][1]["concat_latent_image"], r["concat_latent_image"])
        assert torch.equal(side[0][1]["concat_mask"], tensor(r["concat_mask"]))
    assert list(latent["samples"].shape) == r["latent_shape"]


@pytest.mark.parametrize("case", ["two", "extend"])
def test_sampling_matches_comfyui(rec: dict, node_workspace, case: str) -> None:
    """Two euler steps at cfg 1 (the template's sampler, its negative zeroed) of the two-head tiny file through
    UNETLoader, ModelPatchLoader, WanInfiniteTalkToVideo and SamplerCustomAdvanced: two speakers from a start image,
    and one speaker extending 12 previous frames by their last 5 (every evaluation's input starts with the motion
    latent; the sampled latent gets it in front again); the output latent as ComfyUI 0.10.0's sampler gives it."""
    import asyncio

    from nodes.loaders import make_ref
    from nodes.models.wan_demo import FILES as WAN_FILES
    from nodes.models.wan_infinitetalk_demo import FILES
    from tests.node_calls import call_node

    models = node_workspace.models_dir
    gen = torch.Generator().manual_seed(47)  # the recorder's draws, in its order
    cond = [[torch.randn(1, 512, 32, generator=gen), {}]]
    out1, out2 = _encoder_output(gen, 30), _encoder_output(gen, 24)
    start = torch.rand(1, 48, 64, 3, generator=gen)
    previous = torch.rand(12, 48, 64, 3, generator=gen)
    mask_1 = (torch.rand(1, 48, 64, generator=gen) > 0.5).float()
    mask_2 = 1.0 - mask_1
    if case == "two":
        extra = {"mode": "two_speakers", "mode.audio_encoder_output_2": out2, "mode.mask_1": mask_1}
        extra.update({"mode.mask_2": mask_2, "motion_frame_count": 9})
    else:
        extra = {"mode": "single_speaker", "previous_frames": previous, "motion_frame_count": 5}

    async def run() -> torch.Tensor:
        (model,) = await call_node("UNETLoader", unet_name=FILES["wan"].split("/")[1], weight_dtype="default")
        from nodes.library.model_patch import ModelPatchLoader

        (patch_ref,) = ModelPatchLoader().load_model_patch(FILES["patch"].split("/")[1])
        vae = make_ref("vae", "qwen_image", [models / WAN_FILES["vae"]])
        (negative,) = await call_node("ConditioningZeroOut", conditioning=cond)
        m, pos, neg, latent, _ = await call_node(
            "WanInfiniteTalkToVideo",
            model=model,
            model_patch=patch_ref,
            positive=cond,
            negative=negative,
            vae=vae,
            width=64,
            height=48,
            length=9,
            audio_encoder_output_1=out1,
            audio_scale=1.0,
            start_image=start,
            **extra,
        )
        (noise,) = await call_node("RandomNoise", noise_seed=rec["sampling"][case]["seed"])
        (sampler,) = await call_node("KSamplerSelect", sampler_name="euler")
        (sigmas,) = await call_node("BasicScheduler", model=m, scheduler="normal", steps=2, denoise=1.0)
        (guider,) = await call_node("CFGGuider", model=m, positive=pos, negative=neg, cfg=1.0)
        out, _ = await call_node(
            "SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent
        )
        return out["samples"]

    _close(asyncio.run(run()), rec["sampling"][case]["samples"])


def test_loader_and_other_patch_nodes_name_the_patch(node_workspace) -> None:
    """ModelPatchLoader gives the patch's kind; a file missing its blocks is named; the ControlNet-patch node refuses
    it; WanInfiniteTalkToVideo refuses another kind of patch."""
    import asyncio

    from safetensors.torch import save_file

    from nodes.library.model_patch import ModelPatchLoader, QwenImageDiffsynthControlnet
    from nodes.library.wan_infinitetalk import WanInfiniteTalkToVideo
    from nodes.loaders import make_ref
    from nodes.models.wan_infinitetalk_demo import FILES

    (ref,) = ModelPatchLoader().load_model_patch(FILES["patch"].split("/")[1])
    assert ref.arch == "wan_multitalk"
    broken = {k: v for k, v in infinitetalk_patch().items() if not k.startswith("blocks.")}
    save_file(broken, str(node_workspace.models_dir / "model_patches" / "broken_talk.safetensors"))
    with pytest.raises(ValueError, match="broken_talk"):
        ModelPatchLoader().load_model_patch("broken_talk.safetensors")
    model = make_ref("diffusion_model", "qwen_image", [node_workspace.models_dir / FILES["wan"]])
    vae = make_ref("vae", "qwen_image", [node_workspace.models_dir / "vae" / "wan_2.1_vae_tiny.safetensors"])
    with pytest.raises(ValueError, match="WanInfiniteTalkToVideo"):
        QwenImageDiffsynthControlnet().diffsynth_controlnet(model, ref, vae, torch.zeros(1, 8, 8, 3), 1.0)
    other = make_ref("model_patch", "qwen_diffsynth", [node_workspace.models_dir / FILES["patch"]])
    node = WanInfiniteTalkToVideo().execute("single_speaker", model, other, [], [], None, 64, 64, 9, {}, 9)
    with pytest.raises(ValueError, match="InfiniteTalk's audio patch"):
        asyncio.run(node)
